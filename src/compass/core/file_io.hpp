#pragma once
// Writing output files so that a failure never leaves a half-written file behind and never
// destroys the file that was there before.

#include <string>
#include <string_view>

#include "compass/core/result.hpp"

namespace compass {

/// Checks, before any work, that `path` can be an output: not empty, not a directory, and not
/// an existing regular file unless `overwrite`. Existing non-regular files (a device such as
/// /dev/null, a FIFO) are accepted: writing to them loses nothing.
Status check_output_path(const std::string& path, bool overwrite);

/// Writes `text` to `path`. A regular file (new, or replaced when `overwrite`) is written to a
/// temporary file in the same directory, flushed to disk and checked, then renamed over
/// `path`, so `path` is either the complete new file or untouched; a link is written through
/// to its target. A device or FIFO is written in place and every write is checked (so a full
/// device is an error). Errors name the path.
Status write_file_atomic(const std::string& path, std::string_view text, bool overwrite);

}  // namespace compass
