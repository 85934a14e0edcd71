// tpcompass._core: the compass application inside the Python process. run() calls the same
// run_app the command-line binary calls, so the Python API has the CLI's defaults, checks and
// messages by construction.
//
// What the run writes never goes through the process's descriptors 1 and 2: while it runs, the
// C library's `stdout` and `stderr` streams (and std::cout / std::cerr) point at streams of our
// own: stdout at memory, stderr at memory or, when progress is asked for, at a pipe read on the
// calling thread. Python's own sys.stdout / sys.stderr write to descriptors 1 and 2, so whatever
// a progress callback (or tqdm) prints appears where it always does and never mixes with the
// result.

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <optional>
#include <sstream>
#include <stdexcept>
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

namespace nb = nanobind;

namespace {

// A C stream whose text stays in memory (open_memstream).
class MemoryStream {
 public:
  MemoryStream() { file_ = open_memstream(&data_, &size_); }
  ~MemoryStream() {
    close();
    std::free(data_);
  }
  MemoryStream(const MemoryStream&) = delete;
  MemoryStream& operator=(const MemoryStream&) = delete;

  /// The stream to write to; null when it could not be made.
  std::FILE* file() const { return file_; }
  /// Closes the stream and returns everything written to it.
  std::string take() {
    close();
    return data_ != nullptr ? std::string(data_, size_) : std::string();
  }

 private:
  void close() {
    if (file_ != nullptr) std::fclose(file_);
    file_ = nullptr;
  }
  char* data_ = nullptr;
  std::size_t size_ = 0;
  std::FILE* file_ = nullptr;
};

// Points the C library's stdout/stderr and std::cout/std::cerr at other streams while it lives.
class StandardStreams {
 public:
  StandardStreams(std::FILE* out, std::FILE* err, std::streambuf* cout_buf,
                  std::streambuf* cerr_buf)
      : saved_out_(stdout), saved_err_(stderr) {
    std::fflush(stdout);
    std::fflush(stderr);
    std::cout.flush();
    stdout = out;
    stderr = err;
    saved_cout_ = std::cout.rdbuf(cout_buf);
    saved_cerr_ = std::cerr.rdbuf(cerr_buf);
  }
  ~StandardStreams() {
    std::cout.flush();
    std::cerr.flush();
    std::cout.rdbuf(saved_cout_);
    std::cerr.rdbuf(saved_cerr_);
    std::fflush(stdout);
    std::fflush(stderr);
    stdout = saved_out_;
    stderr = saved_err_;
  }
  StandardStreams(const StandardStreams&) = delete;
  StandardStreams& operator=(const StandardStreams&) = delete;

 private:
  std::FILE* saved_out_;
  std::FILE* saved_err_;
  std::streambuf* saved_cout_ = nullptr;
  std::streambuf* saved_cerr_ = nullptr;
};

constexpr std::string_view kProgressPrefix = "compass: progress: ";

// One run at a time: the standard streams are the process's. A run started from a progress
// callback (same thread) is refused instead of waiting for itself.
std::mutex run_mutex;
std::thread::id run_owner;

int run_app_guarded(std::vector<std::string> args) {
  std::vector<char*> argv;
  for (std::string& s : args) argv.push_back(s.data());
  argv.push_back(nullptr);
  try {
    return compass::cli::run_app(static_cast<int>(args.size()), argv.data());
  } catch (const std::exception& e) {  // run_app catches everything; this is a last guard
    std::fprintf(stderr, "compass: error: %s\n", e.what());
  } catch (...) {
    std::fprintf(stderr, "compass: error: unknown failure\n");
  }
  return 2;
}

// Lines read from the run's stderr: progress lines go to the callback, the rest is kept.
class StderrLines {
 public:
  explicit StderrLines(nb::callable on_progress) : on_progress_(std::move(on_progress)) {}

  void add(const char* data, std::size_t n) {
    pending_.append(data, n);
    std::size_t eol;
    while ((eol = pending_.find('\n')) != std::string::npos) {
      handle(pending_.substr(0, eol));
      pending_.erase(0, eol + 1);
    }
  }
  /// The text that was not progress.
  std::string finish() {
    text_ += pending_;
    pending_.clear();
    return std::move(text_);
  }
  /// The first exception a callback raised (later calls are skipped after it).
  std::optional<nb::python_error>& error() { return error_; }

 private:
  void handle(const std::string& line) {
    if (line.rfind(kProgressPrefix, 0) != 0) {
      text_ += line;
      text_ += '\n';
      return;
    }
    if (error_) return;
    try {
      on_progress_(line.substr(kProgressPrefix.size()));
    } catch (nb::python_error& e) {
      error_.emplace(std::move(e));
    }
  }

  nb::callable on_progress_;
  std::string pending_;
  std::string text_;
  std::optional<nb::python_error> error_;
};

std::tuple<int, std::string, std::string> run(const std::vector<std::string>& args,
                                              std::optional<nb::callable> on_progress) {
  std::vector<std::string> full;
  full.reserve(args.size() + 1);
  full.emplace_back("compass");
  full.insert(full.end(), args.begin(), args.end());

  if (run_owner == std::this_thread::get_id())  // read under the GIL, which the owner holds here
    throw std::runtime_error("tpcompass: a progress callback cannot start another compass run");
  std::unique_lock<std::mutex> lock(run_mutex, std::defer_lock);
  {
    nb::gil_scoped_release no_gil;
    lock.lock();
  }
  struct Owner {
    Owner() { run_owner = std::this_thread::get_id(); }
    ~Owner() { run_owner = std::thread::id(); }
  } owner;
  MemoryStream out;
  std::ostringstream cout_text;
  std::ostringstream cerr_text;
  if (out.file() == nullptr) throw std::runtime_error("tpcompass: cannot open a memory stream");

  if (!on_progress) {
    MemoryStream err;
    if (err.file() == nullptr) throw std::runtime_error("tpcompass: cannot open a memory stream");
    int rc = 0;
    {
      nb::gil_scoped_release no_gil;
      StandardStreams streams(out.file(), err.file(), cout_text.rdbuf(), cerr_text.rdbuf());
      rc = run_app_guarded(std::move(full));
    }
    return {rc, out.take() + cout_text.str(), err.take() + cerr_text.str()};
  }

  // With progress: the run goes on in a worker thread and writes its stderr into a pipe; this
  // thread reads the pipe and calls the callback with the GIL, so the callback runs on the
  // caller's thread while the run continues. Close-on-exec keeps processes the run starts from
  // holding the pipe open.
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error("tpcompass: cannot open a pipe");
  std::FILE* err_pipe = fdopen(fds[1], "w");
  if (err_pipe == nullptr) {
    close(fds[0]);
    close(fds[1]);
    throw std::runtime_error("tpcompass: cannot open a pipe");
  }
  std::setvbuf(err_pipe, nullptr, _IOLBF, BUFSIZ);
  int rc = 0;
  std::thread worker([&, argv = std::move(full)]() mutable {
    {
      StandardStreams streams(out.file(), err_pipe, cout_text.rdbuf(), cerr_text.rdbuf());
      rc = run_app_guarded(std::move(argv));
    }
    std::fclose(err_pipe);  // the reader sees the end of the pipe
  });
  StderrLines lines(std::move(*on_progress));
  char buf[4096];
  for (;;) {
    ssize_t n = 0;
    {
      nb::gil_scoped_release no_gil;
      do {
        n = read(fds[0], buf, sizeof buf);
      } while (n < 0 && errno == EINTR);
    }
    if (n <= 0) break;
    lines.add(buf, static_cast<std::size_t>(n));
  }
  {
    nb::gil_scoped_release no_gil;
    worker.join();
  }
  close(fds[0]);
  std::string err_text = lines.finish() + cerr_text.str();
  if (lines.error()) throw std::move(*lines.error());
  return {rc, out.take() + cout_text.str(), std::move(err_text)};
}

}  // namespace

NB_MODULE(_core, m) {
  m.doc() = "The compass application, run in-process (see tpcompass for the Python API).";
  m.def("run", &run, nb::arg("args"), nb::arg("on_progress") = nb::none(),
        "Runs `compass <args...>` in this process; returns (exit code, stdout, stderr). The run's "
        "output is kept in memory, never written to the process's descriptors 1 and 2. With "
        "on_progress, each 'compass: progress: ' line the run writes to stderr is passed to it "
        "(the rest of the line) on the calling thread as it is written, and left out of the "
        "returned stderr; an exception the callback raises is raised when the run ends.");
  m.attr("version") = COMPASS_VERSION;
  m.attr("planning_only") = static_cast<bool>(COMPASS_PLANNING_ONLY);
}
