#pragma once
// Loading, validating and saving Profiles (JSON format documented in docs/profile-format.md).

#include <string>
#include <string_view>
#include <vector>

#include "compass/hardware/profile.hpp"

namespace compass::hardware {

/// The most copy engines a device may declare (real GPUs have a handful); every engine is a
/// serial resource the planner, simulator and executors track.
inline constexpr int kMaxCopyEngines = 64;

/// Checks every field and cross-reference; the error names the field ("links[3].a: ...").
Status validate(const Profile& p);

/// Parses JSON text into a validated Profile; `origin` (a file name) prefixes error messages.
Result<Profile> profile_from_json(std::string_view text, std::string_view origin = "<json>");
/// Checks JSON text and returns every error found (empty: the profile loads), each naming
/// the origin and the JSON path ("my.json: links[3].a: unknown node 'sw9'"). Routes are named
/// by their index in the text. An element that fails is left out of later checks.
std::vector<Error> check_profile_json(std::string_view text, std::string_view origin);
/// Reads a file and checks it like check_profile_json.
std::vector<Error> check_profile_file(const std::string& path);

/// Serialises to canonical JSON (2-space indent); profile_from_json(to_json(p)) == p.
std::string profile_to_json(const Profile& p);

/// Reads and parses a file.
Result<Profile> load_profile_file(const std::string& path);
/// Writes a file; refuses to overwrite an existing file unless `overwrite`.
Status save_profile_file(const Profile& p, const std::string& path, bool overwrite);

/// A preset name or a path to a JSON file.
Result<Profile> resolve_profile(const std::string& preset_or_path);

}  // namespace compass::hardware
