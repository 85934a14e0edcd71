#pragma once
// What reading and checking a profile share (profile_read.cpp, profile_check.cpp): the size
// bounds, how an element is named in errors, where errors go, and the graph and route checks.
// Internal to the hardware layer.

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "compass/core/result.hpp"
#include "compass/hardware/profile.hpp"

namespace compass::hardware::detail {

// Bounds that keep absurd inputs (and the fuzzer) fast; generous for real machines.
constexpr std::size_t kMaxNodes = 4096;
constexpr std::size_t kMaxLinks = 65536;
constexpr std::size_t kMaxDevices = 256;

/// "array[i]".
std::string indexed(std::string_view array, std::size_t i);

/// Where checking goes: without a list the first error ends the check (load, validate); with
/// one every error is kept and checking goes on (`compass profile check`).
class ErrorSink {
 public:
  explicit ErrorSink(std::vector<Error>* all = nullptr) : all_(all) {}
  /// Records a failed status; true when the caller must stop (first-error mode).
  bool failed(const Status& s) {
    if (s.ok()) return false;
    if (!first_) first_ = s.error();
    if (all_) {
      all_->push_back(s.error());
      return false;
    }
    return true;
  }
  bool any() const { return first_.has_value(); }
  bool collecting() const { return all_ != nullptr; }
  Status status() const { return first_ ? Status(*first_) : Status::success(); }

 private:
  std::vector<Error>* all_;
  std::optional<Error> first_;
};

/// File positions of the elements kept in memory (an element that failed to parse is absent,
/// so in-memory index i is file index map[i]); empty means identity.
struct FilePositions {
  std::vector<std::size_t> devices, nodes, links, routes;
  static std::size_t at(const std::vector<std::size_t>& map, std::size_t i) {
    return i < map.size() ? map[i] : i;
  }
};

/// Everything but the routes (which need a sound graph first).
Status validate_graph(const Profile& p, ErrorSink& sink, const FilePositions& at = {});
/// The routes as a file gives them (before the missing ones are computed): each checked on its
/// own and for duplicates, errors naming the route's index in the file.
Status validate_given_routes(const Profile& p, ErrorSink& sink, const FilePositions& at);
/// The complete route table: every ordered GPU pair once, sorted by (src, dst).
Status validate_routes(const Profile& p);

}  // namespace compass::hardware::detail
