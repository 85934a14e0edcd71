#pragma once
// Reading a JSON text a user gave us (profiles, models, clusters, schedules, the files `plot`
// draws): one parser with one set of errors, each starting with where the text came from.
//  - "ORIGIN: line L: malformed JSON: DETAIL" where the text is not JSON;
//  - "ORIGIN: malformed JSON: DETAIL" where a number does not fit a double (1e999);
//  - "ORIGIN: malformed JSON: nested deeper than 64 levels";
//  - "ORIGIN: duplicate key 'K' (in 'P')": JSON allows a key twice in one object and the parser
//    would keep the last one silently, so a value the user wrote would be lost.

#include <cstddef>
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "compass/core/result.hpp"

namespace compass {

/// Deepest nesting of arrays and objects a JSON text may have.
inline constexpr std::size_t kMaxJsonDepth = 64;

/// `text` parsed, or the error above; `origin` names the text (a path, "schedule JSON").
Result<nlohmann::json> parse_json_text(std::string_view text, std::string_view origin);

/// `v` as an integer in [min, max]; nullopt when it is not a JSON integer (a fraction, a string)
/// or lies outside, unsigned values past the signed range included.
std::optional<std::int64_t> json_integer(const nlohmann::json& v, std::int64_t min,
                                         std::int64_t max);

/// The text of a JSON library exception (`what()`) without its "[json.exception.KIND.ID] "
/// prefix, for a message to a user.
std::string without_json_prefix(const std::string& what);

}  // namespace compass
