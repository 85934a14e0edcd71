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
    t_.assign(2 * leaves_, std::numeric_limits<double>::infinity());
    win_.assign(2 * leaves_, 0);
    for (std::size_t i = 0; i < leaves_; ++i) win_[leaves_ + i] = static_cast<int>(i);
    for (std::size_t node = leaves_ - 1; node >= 1; --node) play(node);
  }
  /// The index of the earliest time (0 when every time is infinity).
  std::size_t index() const { return static_cast<std::size_t>(win_[1]); }
  /// The earliest time.
  double time() const { return t_[1]; }
  /// Time i (i < n).
  double at(std::size_t i) const { return t_[leaves_ + i]; }
  /// Sets time i (i < n) to t.
  void set(std::size_t i, double t) {
    std::size_t node = leaves_ + i;
    t_[node] = std::isnan(t) ? std::numeric_limits<double>::infinity() : t;
    for (node /= 2; node >= 1; node /= 2) play(node);
  }

 private:
  // The earlier of a node's two children, the left (lower indices) on ties.
  void play(std::size_t node) {
    const double a = t_[2 * node], b = t_[2 * node + 1];
    const bool right = b < a;
    t_[node] = right ? b : a;
    win_[node] = right ? win_[2 * node + 1] : win_[2 * node];
  }

  std::size_t leaves_ = 1;
  // Per node: the earliest time in its subtree and its index (leaves from leaves_ on; the
  // padding beyond n stays infinity).
  std::vector<double> t_;
  std::vector<int> win_;
};

}  // namespace compass
