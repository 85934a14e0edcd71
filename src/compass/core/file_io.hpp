#pragma once
// Writing output files so that a failure never leaves a half-written file behind and never
// destroys the file that was there before.

#include <cstdint>
#include <string>
#include <string_view>

#include "compass/core/result.hpp"

namespace compass {

/// Checks, before any work, that `path` can be an output: not empty, not a directory, and not
/// an existing regular file unless `overwrite`. Existing non-regular files (a device such as
/// /dev/null, a FIFO) are accepted: writing to them loses nothing.
Status check_output_path(const std::string& path, bool overwrite);

/// One output written in two steps, so that a command with several outputs writes all or none:
/// stage() does everything that can fail for lack of space or permission (a regular file is
/// written to a temporary file beside `path`, flushed to disk and checked), commit() puts it in
/// place (a rename, or a link when the file must not be overwritten). A device or FIFO cannot be
/// staged: its text is kept and written in place by commit(), every write checked. A staged file
/// that is never committed is removed by the destructor. Errors name the path.
class StagedFile {
 public:
  static Result<StagedFile> stage(const std::string& path, std::string_view text, bool overwrite);
  StagedFile(StagedFile&& other) noexcept;
  StagedFile& operator=(StagedFile&&) = delete;
  StagedFile(const StagedFile&) = delete;
  StagedFile& operator=(const StagedFile&) = delete;
  ~StagedFile();

  /// True for a device or FIFO (written by commit(); it may still fail there).
  bool in_place() const { return in_place_; }
  /// Puts the staged text at its path; once only.
  Status commit();

 private:
  StagedFile() = default;
  std::string path_;    ///< as the user named it (for messages)
  std::string target_;  ///< the file replaced (a link's target)
  std::string tmp_;     ///< the temporary file; empty once committed or for a device
  std::string text_;    ///< a device's text
  bool in_place_ = false;
  bool overwrite_ = false;
};

/// Writes `text` to `path`. A regular file (new, or replaced when `overwrite`) is written to a
/// temporary file in the same directory, flushed to disk and checked, then renamed over
/// `path`, so `path` is either the complete new file or untouched; a link is written through
/// to its target. A device or FIFO is written in place and every write is checked (so a full
/// device is an error). Errors name the path.
Status write_file_atomic(const std::string& path, std::string_view text, bool overwrite);

/// Reads the whole of a regular file of at most `max_bytes`: the one way input files are read.
/// It never blocks: the file is opened without waiting (O_NONBLOCK) and must be a regular file,
/// so a FIFO, a terminal or a device is refused at once. Errors name the path: "no such file",
/// "is a directory", "not a regular file", "file too large (N bytes; at most M)", a read error.
Result<std::string> read_regular_file(const std::string& path, std::uint64_t max_bytes);

}  // namespace compass
