#pragma once
// What differs between two profiles, field by field, named by JSON path.

#include <string>
#include <vector>

#include "compass/hardware/profile.hpp"

namespace compass::hardware {

/// One field that differs. Elements of `devices`, `nodes` and `links` are named by their
/// `name` (links[pcie-gpu0].latency_s), routes by their pair (routes[gpu0->gpu1].hops), other
/// array elements by index (notes[2]). A side that lacks the field holds "(absent)".
struct ProfileDifference {
  std::string path;
  std::string a;  ///< the value in the first profile, as compact JSON
  std::string b;  ///< the value in the second profile
};

/// Every difference between the canonical JSON forms of `a` and `b`, in the order of the
/// format (fields of `a` first, then fields only `b` has).
std::vector<ProfileDifference> diff_profiles(const Profile& a, const Profile& b);

}  // namespace compass::hardware
