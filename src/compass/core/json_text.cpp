#include "compass/core/json_text.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>
#include <unordered_set>
#include <vector>

namespace compass {

namespace {

// The deepest nesting of [ and { outside strings, found before parsing so that a hostile text
// never builds a deep tree.
std::size_t nesting_depth(std::string_view text) {
  std::size_t depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (c == '"')
      in_string = true;
    else if (c == '[' || c == '{')
      deepest = std::max(deepest, ++depth);
    else if ((c == ']' || c == '}') && depth > 0)
      --depth;
  }
  return deepest;
}

// A key met twice in one object: thrown from the parser's callback to stop it there.
struct DuplicateKey {
  std::string key, in;
};

// An array or object open while parsing: its keys (an object's), and the key it is the value
// of (an element of an array takes the array's; empty at the top).
struct Open {
  bool object = false;
  std::string name;
  std::unordered_set<std::string> keys;
};

}  // namespace

Result<nlohmann::json> parse_json_text(std::string_view text, std::string_view origin) {
  using json = nlohmann::json;
  if (nesting_depth(text) > kMaxJsonDepth)
    return make_error("{}: malformed JSON: nested deeper than {} levels", origin, kMaxJsonDepth);
  std::vector<Open> open;
  std::string last_key;  // the key whose value comes next
  auto callback = [&](int, json::parse_event_t event, json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start:
      case json::parse_event_t::array_start: {
        std::string name = open.empty() ? "" : open.back().object ? last_key : open.back().name;
        open.push_back(Open{event == json::parse_event_t::object_start, std::move(name), {}});
        break;
      }
      case json::parse_event_t::object_end:
      case json::parse_event_t::array_end:
        open.pop_back();
        break;
      case json::parse_event_t::key:
        last_key = parsed.get<std::string>();
        if (!open.back().keys.insert(last_key).second)
          throw DuplicateKey{last_key, open.back().name};
        break;
      case json::parse_event_t::value:
        break;
    }
    return true;
  };
  try {
    return json::parse(text.begin(), text.end(), callback);
  } catch (const DuplicateKey& d) {
    if (d.in.empty()) return make_error("{}: duplicate key '{}'", origin, d.key);
    return make_error("{}: duplicate key '{}' (in '{}')", origin, d.key, d.in);
  } catch (const json::parse_error& e) {
    const std::size_t upto = std::min<std::size_t>(e.byte == 0 ? 0 : e.byte - 1, text.size());
    const auto line = 1 + std::count(text.begin(), text.begin() + upto, '\n');
    // what(): "[json.exception.parse_error.101] parse error at line 4, column 3: <detail>"
    const std::string what = e.what();
    std::string detail = without_json_prefix(what);
    if (const auto at = what.find("parse error"); at != std::string::npos)
      if (const auto colon = what.find(": ", at); colon != std::string::npos)
        detail = what.substr(colon + 2);
    return make_error("{}: line {}: malformed JSON: {}", origin, line, detail);
  } catch (const json::exception& e) {
    // e.g. "number overflow parsing '1e999'" (out_of_range.406) carries no position.
    return make_error("{}: malformed JSON: {}", origin, without_json_prefix(e.what()));
  }
}

std::optional<std::int64_t> json_integer(const nlohmann::json& v, std::int64_t min,
                                         std::int64_t max) {
  if (!v.is_number_integer()) return std::nullopt;
  if (v.is_number_unsigned()) {
    const std::uint64_t u = v.get<std::uint64_t>();
    if (max < 0 || u > static_cast<std::uint64_t>(max)) return std::nullopt;
    const auto x = static_cast<std::int64_t>(u);
    if (x < min) return std::nullopt;
    return x;
  }
  const std::int64_t x = v.get<std::int64_t>();
  if (x < min || x > max) return std::nullopt;
  return x;
}

std::string without_json_prefix(const std::string& what) {
  if (what.rfind("[json.exception.", 0) == 0) {
    const auto end = what.find("] ");
    if (end != std::string::npos) return what.substr(end + 2);
  }
  return what;
}

}  // namespace compass
