#include "compass/hardware/profile_diff.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "compass/hardware/profile_io.hpp"

namespace compass::hardware {

namespace {

using ojson = nlohmann::ordered_json;

constexpr const char* kAbsent = "(absent)";

std::string compact(const ojson& j) { return j.dump(-1, ' ', false, ojson::error_handler_t::replace); }

/// The key that identifies an element of an array at `path`, or "" to match by index.
std::string element_key(const std::string& path, const ojson& e) {
  if (!e.is_object()) return "";
  if (path == "devices" || path == "nodes" || path == "links") {
    auto it = e.find("name");
    return it != e.end() && it->is_string() ? it->get<std::string>() : "";
  }
  if (path == "routes") {
    auto s = e.find("src");
    auto d = e.find("dst");
    if (s != e.end() && d != e.end() && s->is_string() && d->is_string())
      return s->get<std::string>() + "->" + d->get<std::string>();
  }
  return "";
}

void walk(const std::string& path, const ojson& a, const ojson& b,
          std::vector<ProfileDifference>& out);

void walk_arrays(const std::string& path, const ojson& a, const ojson& b,
                 std::vector<ProfileDifference>& out) {
  const bool keyed = !a.empty() || !b.empty()
                         ? !element_key(path, a.empty() ? b[0] : a[0]).empty()
                         : false;
  if (!keyed) {
    const std::size_t n = std::max(a.size(), b.size());
    for (std::size_t i = 0; i < n; ++i) {
      const std::string p = fmt::format("{}[{}]", path, i);
      if (i >= a.size())
        out.push_back({p, kAbsent, compact(b[i])});
      else if (i >= b.size())
        out.push_back({p, compact(a[i]), kAbsent});
      else
        walk(p, a[i], b[i], out);
    }
    return;
  }
  auto find = [&](const ojson& arr, const std::string& key) -> const ojson* {
    for (const ojson& e : arr)
      if (element_key(path, e) == key) return &e;
    return nullptr;
  };
  for (const ojson& e : a) {
    const std::string key = element_key(path, e);
    const std::string p = fmt::format("{}[{}]", path, key);
    if (const ojson* other = find(b, key))
      walk(p, e, *other, out);
    else
      out.push_back({p, compact(e), kAbsent});
  }
  for (const ojson& e : b) {
    const std::string key = element_key(path, e);
    if (!find(a, key)) out.push_back({fmt::format("{}[{}]", path, key), kAbsent, compact(e)});
  }
}

void walk(const std::string& path, const ojson& a, const ojson& b,
          std::vector<ProfileDifference>& out) {
  if (a == b) return;
  if (a.is_object() && b.is_object()) {
    for (auto it = a.begin(); it != a.end(); ++it) {
      const std::string p = path.empty() ? it.key() : path + "." + it.key();
      auto jt = b.find(it.key());
      if (jt == b.end())
        out.push_back({p, compact(it.value()), kAbsent});
      else
        walk(p, it.value(), *jt, out);
    }
    for (auto jt = b.begin(); jt != b.end(); ++jt)
      if (a.find(jt.key()) == a.end())
        out.push_back({path.empty() ? jt.key() : path + "." + jt.key(), kAbsent,
                       compact(jt.value())});
    return;
  }
  // Routes' hops and other arrays of plain values are compared whole.
  if (a.is_array() && b.is_array() && path.find(".hops") == std::string::npos) {
    walk_arrays(path, a, b, out);
    return;
  }
  out.push_back({path, compact(a), compact(b)});
}

}  // namespace

std::vector<ProfileDifference> diff_profiles(const Profile& a, const Profile& b) {
  const ojson ja = ojson::parse(profile_to_json(a));
  const ojson jb = ojson::parse(profile_to_json(b));
  std::vector<ProfileDifference> out;
  walk("", ja, jb, out);
  return out;
}

}  // namespace compass::hardware
