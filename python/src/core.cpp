// tpcompass._core: the compass application inside the Python process. run() calls the same
// run_app the command-line binary calls, with stdout and stderr captured, so the Python API has
// the CLI's defaults, checks and messages by construction.

#include <unistd.h>

#include <cstdio>
#include <string>
#include <tuple>
#include <vector>

#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include "compass/cli/app.hpp"
#include "compass/cli/common.hpp"

namespace nb = nanobind;

namespace {

// Points one of the standard descriptors at a temporary file and restores it on destruction.
class Capture {
 public:
  explicit Capture(int fd) : fd_(fd), file_(std::tmpfile()), saved_(dup(fd)) {
    if (file_ != nullptr && saved_ >= 0) dup2(fileno(file_), fd_);
  }
  ~Capture() {
    restore();
    if (file_ != nullptr) std::fclose(file_);
  }
  Capture(const Capture&) = delete;
  Capture& operator=(const Capture&) = delete;

  // Restores the descriptor and returns what was written to it.
  std::string finish() {
    restore();
    std::string text;
    if (file_ == nullptr) return text;
    std::rewind(file_);
    char buf[4096];
    std::size_t n = 0;
    while ((n = std::fread(buf, 1, sizeof buf, file_)) > 0) text.append(buf, n);
    return text;
  }

 private:
  void restore() {
    if (saved_ < 0) return;
    std::fflush(stdout);
    std::fflush(stderr);
    dup2(saved_, fd_);
    close(saved_);
    saved_ = -1;
  }
  int fd_;
  std::FILE* file_;
  int saved_;
};

std::tuple<int, std::string, std::string> run(const std::vector<std::string>& args) {
  std::vector<std::string> storage;
  storage.reserve(args.size() + 1);
  storage.emplace_back("compass");
  storage.insert(storage.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& s : storage) argv.push_back(s.data());
  argv.push_back(nullptr);
  std::fflush(stdout);
  std::fflush(stderr);
  Capture out(STDOUT_FILENO);
  Capture err(STDERR_FILENO);
  const int rc = compass::cli::run_app(static_cast<int>(storage.size()), argv.data());
  std::fflush(stdout);
  std::fflush(stderr);
  std::string out_text = out.finish();
  std::string err_text = err.finish();
  return {rc, std::move(out_text), std::move(err_text)};
}

}  // namespace

NB_MODULE(_core, m) {
  m.doc() = "The compass application, run in-process (see tpcompass for the Python API).";
  m.def("run", &run, nb::arg("args"),
        "Runs `compass <args...>` in this process; returns (exit code, stdout, stderr).");
  m.attr("version") = COMPASS_VERSION;
}
