#pragma once
// Running helper programs without a shell, and a private temporary directory for the files
// they read. Arguments travel as an argument vector, so no character in a path is special.

#include <string>
#include <vector>

#include "compass/core/result.hpp"

namespace compass::cli {

/// Runs argv[0] (looked up in PATH when it has no '/') with the arguments argv[1..], waits for
/// it and returns its exit status (128 + signal when a signal ended it). stdin is /dev/null;
/// with `quiet` its stdout and stderr are discarded too. An error when it cannot be started.
Result<int> run_program(const std::vector<std::string>& argv, bool quiet);

/// A new directory only this user can enter (mkdtemp under the system temp directory), removed
/// with its contents by the destructor.
class PrivateTempDir {
 public:
  static Result<PrivateTempDir> create();
  PrivateTempDir(PrivateTempDir&& other) noexcept;
  PrivateTempDir& operator=(PrivateTempDir&&) = delete;
  PrivateTempDir(const PrivateTempDir&) = delete;
  PrivateTempDir& operator=(const PrivateTempDir&) = delete;
  ~PrivateTempDir();

  const std::string& path() const { return path_; }

  /// Creates `name` inside the directory (never following a link, failing if it exists) and
  /// writes `text` to it; returns its path.
  Result<std::string> write(const std::string& name, const std::string& text) const;

 private:
  explicit PrivateTempDir(std::string path) : path_(std::move(path)) {}
  std::string path_;
};

}  // namespace compass::cli
