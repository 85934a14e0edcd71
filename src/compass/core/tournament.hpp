#pragma once
// The earliest of n times that change one at a time: a tournament tree, as event loops and list
// schedules pick their next step.
#include <cmath>
#include <cstddef>
#include <limits>
#include <vector>

namespace compass {

/// The earliest of times 0 .. n-1, the lowest index on ties; a time that is not a number counts
/// as infinity (no scan with '<' picks it). Setting one time costs about log2(n) comparisons,
/// reading the earliest none. All times start at infinity.
class EarliestTime {
 public:
  explicit EarliestTime(std::size_t n) {
    while (leaves_ < n) leaves_ *= 2;
    at_.assign(leaves_, std::numeric_limits<double>::infinity());
    win_.assign(2 * leaves_, 0);
    for (std::size_t i = 0; i < leaves_; ++i) win_[leaves_ + i] = static_cast<int>(i);
    for (std::size_t node = leaves_ - 1; node >= 1; --node) play(node);
  }
  /// The index of the earliest time (0 when every time is infinity).
  std::size_t index() const { return static_cast<std::size_t>(win_[1]); }
  /// The earliest time.
  double time() const { return at_[static_cast<std::size_t>(win_[1])]; }
  /// Time i (i < n).
  double at(std::size_t i) const { return at_[i]; }
  /// Sets time i (i < n) to t.
  void set(std::size_t i, double t) {
    at_[i] = std::isnan(t) ? std::numeric_limits<double>::infinity() : t;
    for (std::size_t node = (leaves_ + i) / 2; node >= 1; node /= 2) play(node);
  }

 private:
  // The earlier of a node's two children's winners, the left (lower indices) on ties.
  void play(std::size_t node) {
    const int a = win_[2 * node], b = win_[2 * node + 1];
    win_[node] = at_[static_cast<std::size_t>(b)] < at_[static_cast<std::size_t>(a)] ? b : a;
  }

  std::size_t leaves_ = 1;
  std::vector<double> at_;  // per leaf (the padding beyond n stays infinity)
  std::vector<int> win_;    // per node: its subtree's earliest (leaves from leaves_ on)
};

}  // namespace compass
