// tpcompass._core: the compass application inside the Python process. run() calls the same
// run_app the command-line binary calls, with stdout and stderr captured, so the Python API has
// the CLI's defaults, checks and messages by construction.

#include <unistd.h>

#include <cstdio>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <tuple>
#include <vector>

#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
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

constexpr std::string_view kProgressPrefix = "compass: progress: ";

// Points stderr at a pipe whose lines a reader thread hands out as they come: progress lines to
// `on_progress` (with the GIL), every other line kept as the captured text. The run itself
// goes on without the GIL, so the callback can run while it does.
class StreamedStderr {
 public:
  explicit StreamedStderr(nb::callable on_progress) : on_progress_(std::move(on_progress)) {
    int fds[2];
    if (pipe(fds) != 0) return;
    saved_ = dup(STDERR_FILENO);
    if (saved_ < 0 || dup2(fds[1], STDERR_FILENO) < 0) {
      close(fds[0]);
      close(fds[1]);
      return;
    }
    close(fds[1]);
    read_fd_ = fds[0];
    reader_ = std::thread([this] { read_lines(); });
  }
  ~StreamedStderr() { finish(); }
  StreamedStderr(const StreamedStderr&) = delete;
  StreamedStderr& operator=(const StreamedStderr&) = delete;

  // Restores stderr, waits for the reader and returns the text that was not progress. Call it
  // without the GIL: the reader may still need it for a last callback.
  std::string finish() {
    if (saved_ >= 0) {
      std::fflush(stderr);
      dup2(saved_, STDERR_FILENO);  // closes the pipe's last write end: the reader sees EOF
      close(saved_);
      saved_ = -1;
    }
    if (reader_.joinable()) reader_.join();
    if (read_fd_ >= 0) {
      close(read_fd_);
      read_fd_ = -1;
    }
    return std::move(text_);
  }

 private:
  void read_lines() {
    std::string pending;
    char buf[4096];
    for (;;) {
      const ssize_t n = read(read_fd_, buf, sizeof buf);
      if (n <= 0) break;
      pending.append(buf, static_cast<std::size_t>(n));
      std::size_t eol;
      while ((eol = pending.find('\n')) != std::string::npos) {
        handle(pending.substr(0, eol));
        pending.erase(0, eol + 1);
      }
    }
    if (!pending.empty()) text_ += pending;
  }

  void handle(const std::string& line) {
    if (line.rfind(kProgressPrefix, 0) != 0) {
      text_ += line;
      text_ += '\n';
      return;
    }
    nb::gil_scoped_acquire gil;
    try {
      on_progress_(line.substr(kProgressPrefix.size()));
    } catch (nb::python_error& e) {
      e.discard_as_unraisable("tpcompass progress callback");
    }
  }

  nb::callable on_progress_;
  int saved_ = -1;
  int read_fd_ = -1;
  std::thread reader_;
  std::string text_;
};

std::tuple<int, std::string, std::string> run(const std::vector<std::string>& args,
                                              std::optional<nb::callable> on_progress) {
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
  if (!on_progress) {
    Capture err(STDERR_FILENO);
    const int rc = compass::cli::run_app(static_cast<int>(storage.size()), argv.data());
    std::string out_text = out.finish();
    std::string err_text = err.finish();
    return {rc, std::move(out_text), std::move(err_text)};
  }
  StreamedStderr err(std::move(*on_progress));
  int rc = 0;
  std::string err_text;
  {
    nb::gil_scoped_release no_gil;
    rc = compass::cli::run_app(static_cast<int>(storage.size()), argv.data());
    std::fflush(stdout);
    err_text = err.finish();
  }
  std::string out_text = out.finish();
  return {rc, std::move(out_text), std::move(err_text)};
}

}  // namespace

NB_MODULE(_core, m) {
  m.doc() = "The compass application, run in-process (see tpcompass for the Python API).";
  m.def("run", &run, nb::arg("args"), nb::arg("on_progress") = nb::none(),
        "Runs `compass <args...>` in this process; returns (exit code, stdout, stderr). With "
        "on_progress, each 'compass: progress: ' line on stderr is passed to it (the rest of the "
        "line) as it is written, and left out of the returned stderr.");
  m.attr("version") = COMPASS_VERSION;
}
