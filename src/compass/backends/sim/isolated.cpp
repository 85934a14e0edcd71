#include "compass/backends/sim/isolated.hpp"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace compass::backends::sim::detail {

Result<std::string> run_in_child(std::string_view what, const std::function<std::string()>& work) {
  int fds[2];
  if (pipe(fds) != 0) return make_error("{}: pipe failed: {}", what, std::strerror(errno));
  const pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return make_error("{}: fork failed: {}", what, std::strerror(errno));
  }
  if (pid == 0) {
    close(fds[0]);
    // SimGrid reports deadlocks and warnings on stderr; the parent reports errors itself.
    const char* keep = std::getenv("COMPASS_SIM_STDERR");
    const int devnull = keep != nullptr && *keep == '1' ? -1 : open("/dev/null", O_WRONLY);
    if (devnull >= 0) {
      dup2(devnull, STDOUT_FILENO);
      dup2(devnull, STDERR_FILENO);
    }
    std::string bytes;
    try {
      bytes = work();
    } catch (...) {
      _exit(4);
    }
    const char* data = bytes.data();
    std::size_t left = bytes.size();
    while (left > 0) {
      const ssize_t w = write(fds[1], data, left);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) _exit(3);
      data += w;
      left -= static_cast<std::size_t>(w);
    }
    close(fds[1]);
    _exit(0);  // no atexit handlers, no flushing of the parent's stdio buffers
  }
  close(fds[1]);
  std::string bytes;
  char buf[1 << 16];
  for (;;) {
    const ssize_t r = read(fds[0], buf, sizeof buf);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    bytes.append(buf, static_cast<std::size_t>(r));
  }
  close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFSIGNALED(status))
    return make_error("{} crashed (signal {}: {})", what, WTERMSIG(status),
                      strsignal(WTERMSIG(status)));
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return make_error("{} child failed (exit status {})", what, WEXITSTATUS(status));
  return bytes;
}

}  // namespace compass::backends::sim::detail
