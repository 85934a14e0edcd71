#pragma once
// Runs the compass binary as a child process for CLI tests: no shell, pipes for stdout and
// stderr, a fresh working directory, and a timeout that kills the child.

#include <string>
#include <vector>

namespace compass::testing {

struct ProcessResult {
  int exit_code = -1;       ///< exit status, or 128 + signal when killed by a signal
  bool timed_out = false;   ///< the child ran past the timeout and was killed
  std::string out;          ///< everything written to stdout
  std::string err;          ///< everything written to stderr
  std::string spawn_error;  ///< non-empty when the child could not be started
};

/// Where the child's stdout or stderr goes: a pipe the result collects, /dev/full (every write
/// fails with ENOSPC), or nowhere (the descriptor closed, as "2>&-" does).
enum class Stream { pipe, full, closed };

/// Runs `argv[0]` (a path, not searched in PATH) with `argv`, in `cwd`, stdin from /dev/null.
ProcessResult run_process(const std::vector<std::string>& argv, const std::string& cwd,
                          double timeout_s, Stream out = Stream::pipe, Stream err = Stream::pipe);

/// Splits a command line on whitespace; double quotes group words ("a b" -> one argument,
/// "" -> an empty one) and inside them \" and \\ escape. Returns false on an unclosed quote.
bool split_command_line(const std::string& line, std::vector<std::string>& args);

/// A new empty directory under the system temp dir; removed by the destructor.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

/// The compass binary under test: $COMPASS_CLI when set (a copied test binary), else
/// COMPASS_CLI_PATH.
std::string compass_binary();

/// Runs `compass <args...>` in `dir`; a test failure when it cannot start or times out.
ProcessResult compass_in(const std::string& dir, const std::vector<std::string>& args,
                         double timeout_s = 300);

/// The same with stdout and stderr sent where `out` and `err` say.
ProcessResult compass_with_streams(const std::string& dir, const std::vector<std::string>& args,
                                   Stream out, Stream err, double timeout_s = 300);

}  // namespace compass::testing
