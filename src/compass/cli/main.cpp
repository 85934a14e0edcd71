// compass: the command-line entry point (the verbs are in compass/cli).

#include <fcntl.h>
#include <unistd.h>

#include "compass/cli/app.hpp"

namespace {

// A standard stream the caller closed ("2>&-") is given /dev/null opened the wrong way round, so
// that the files compass opens never take its number and every write to it fails (and is
// reported as a failure) instead of landing in an output file.
void keep_standard_descriptors() {
  for (int fd = 0; fd <= 2; ++fd) {
    if (::fcntl(fd, F_GETFD) != -1) continue;
    const int got = ::open("/dev/null", fd == 0 ? O_WRONLY : O_RDONLY);
    if (got >= 0 && got != fd) {
      ::dup2(got, fd);
      ::close(got);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  keep_standard_descriptors();
  return compass::cli::run_app(argc, argv);
}
