#include "subprocess.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <system_error>

#include <gtest/gtest.h>

extern char** environ;

namespace compass::testing {

namespace {

struct Pipe {
  int fd[2] = {-1, -1};
  ~Pipe() {
    for (int f : fd)
      if (f >= 0) ::close(f);
  }
  void close_end(int i) {
    if (fd[i] >= 0) ::close(fd[i]);
    fd[i] = -1;
  }
};

}  // namespace

ProcessResult run_process(const std::vector<std::string>& argv, const std::string& cwd,
                          double timeout_s, Stream out_to, Stream err_to) {
  ProcessResult res;
  if (argv.empty()) {
    res.spawn_error = "empty argv";
    return res;
  }
  Pipe out, err;
  if (::pipe2(out.fd, O_CLOEXEC) != 0 || ::pipe2(err.fd, O_CLOEXEC) != 0) {
    res.spawn_error = std::string("pipe: ") + std::strerror(errno);
    return res;
  }

  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  const Stream to[2] = {out_to, err_to};
  const int pipe_end[2] = {out.fd[1], err.fd[1]};
  for (int i = 0; i < 2; ++i) {
    if (to[i] == Stream::pipe)
      posix_spawn_file_actions_adddup2(&fa, pipe_end[i], i + 1);
    else if (to[i] == Stream::full)
      posix_spawn_file_actions_addopen(&fa, i + 1, "/dev/full", O_WRONLY, 0);
    else
      posix_spawn_file_actions_addclose(&fa, i + 1);
  }
  if (!cwd.empty()) posix_spawn_file_actions_addchdir_np(&fa, cwd.c_str());

  std::vector<char*> cargv;
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);

  // The child leads its own process group so a timeout also kills anything it started.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attr, 0);

  pid_t pid = -1;
  const int rc = ::posix_spawn(&pid, argv[0].c_str(), &fa, &attr, cargv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  out.close_end(1);
  err.close_end(1);
  if (rc != 0) {
    res.spawn_error = "posix_spawn " + argv[0] + ": " + std::strerror(rc);
    return res;
  }

  using Clock = std::chrono::steady_clock;
  const auto deadline =
      Clock::now() + std::chrono::milliseconds(static_cast<long long>(timeout_s * 1000.0));
  pollfd fds[2] = {{out.fd[0], POLLIN, 0}, {err.fd[0], POLLIN, 0}};
  std::string* sinks[2] = {&res.out, &res.err};
  int open_fds = 2;
  for (int i = 0; i < 2; ++i)
    if (to[i] != Stream::pipe) {
      fds[i].fd = -1;  // nothing to read: the child's end went elsewhere
      --open_fds;
    }
  char buf[65536];
  while (open_fds > 0) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) {
      res.timed_out = true;
      break;
    }
    const int n = ::poll(fds, 2, static_cast<int>(left));
    if (n < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      const ssize_t got = ::read(fds[i].fd, buf, sizeof buf);
      if (got > 0) {
        sinks[i]->append(buf, static_cast<std::size_t>(got));
      } else if (got == 0 || (errno != EINTR && errno != EAGAIN)) {
        fds[i].fd = -1;  // the Pipe destructor closes it
        --open_fds;
      }
    }
  }

  int status = 0;
  if (res.timed_out) {
    ::kill(-pid, SIGKILL);
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    res.exit_code = 137;
    return res;
  }
  // Both pipes are closed: the child has exited or is about to; wait, still bounded.
  while (true) {
    const pid_t w = ::waitpid(pid, &status, WNOHANG);
    if (w == pid) break;
    if (w < 0 && errno != EINTR) break;
    if (Clock::now() > deadline) {
      res.timed_out = true;
      ::kill(-pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      res.exit_code = 137;
      return res;
    }
    ::usleep(1000);
  }
  if (WIFEXITED(status)) {
    res.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    res.exit_code = 128 + WTERMSIG(status);
  }
  return res;
}

bool split_command_line(const std::string& line, std::vector<std::string>& args) {
  args.clear();
  std::string cur;
  bool in_word = false, in_quotes = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (in_quotes) {
      if (c == '\\' && i + 1 < line.size() && (line[i + 1] == '"' || line[i + 1] == '\\')) {
        cur += line[++i];
      } else if (c == '"') {
        in_quotes = false;
      } else {
        cur += c;
      }
    } else if (c == '"') {
      in_quotes = true;
      in_word = true;
    } else if (c == ' ' || c == '\t' || c == '\r' || c == '\n') {
      if (in_word) args.push_back(std::move(cur));
      cur.clear();
      in_word = false;
    } else {
      cur += c;
      in_word = true;
    }
  }
  if (in_quotes) return false;
  if (in_word) args.push_back(std::move(cur));
  return true;
}

TempDir::TempDir() {
  std::string templ = (std::filesystem::temp_directory_path() / "compass_cli_XXXXXX").string();
  if (::mkdtemp(templ.data()) == nullptr) {
    throw std::system_error(errno, std::generic_category(), "mkdtemp");
  }
  path_ = templ;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::string compass_binary() {
  // A copied test binary (the device bundle) names the copied compass with COMPASS_CLI.
  if (const char* path = std::getenv("COMPASS_CLI"); path != nullptr && *path != '\0') return path;
  return COMPASS_CLI_PATH;
}

ProcessResult compass_in(const std::string& dir, const std::vector<std::string>& args,
                         double timeout_s) {
  std::vector<std::string> argv{compass_binary()};
  argv.insert(argv.end(), args.begin(), args.end());
  ProcessResult r = run_process(argv, dir, timeout_s);
  EXPECT_TRUE(r.spawn_error.empty()) << r.spawn_error;
  EXPECT_FALSE(r.timed_out) << "timed out: compass " << (args.empty() ? "" : args.front());
  return r;
}

ProcessResult compass_with_streams(const std::string& dir, const std::vector<std::string>& args,
                                   Stream out, Stream err, double timeout_s) {
  std::vector<std::string> argv{compass_binary()};
  argv.insert(argv.end(), args.begin(), args.end());
  ProcessResult r = run_process(argv, dir, timeout_s, out, err);
  EXPECT_TRUE(r.spawn_error.empty()) << r.spawn_error;
  EXPECT_FALSE(r.timed_out) << "timed out: compass " << (args.empty() ? "" : args.front());
  return r;
}

}  // namespace compass::testing
