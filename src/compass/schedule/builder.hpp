#pragma once
// Internal helper of the generators: appends tasks to a Schedule and derives every task's
// dependencies from the regions it reads and writes. Generators emit tasks in an order that is
// a valid sequential execution (the "program order"); each new task then depends on every
// earlier task whose accesses conflict with its own (read-after-write, write-after-read,
// write-after-write on overlapping rectangles of the same buffer). Because every dependency
// points to an earlier task and each resource runs its tasks in list order, the graph is
// acyclic and deadlock-free by construction, and every hazard is ordered.

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "compass/schedule/schedule.hpp"

namespace compass::schedule::detail {

/// A half-open row range [off, off + len).
using Rows = workload::RowRange;

/// Part `i` of `total` rows split into `parts` near-equal consecutive pieces.
inline Rows split_rows(std::int64_t total, int parts, int i) {
  const std::int64_t a = total * i / parts;
  const std::int64_t b = total * (i + 1) / parts;
  return {a, b - a};
}

/// Half `c` (0 or 1) of `len` rows: half 0 is the first ceil(len/2) rows, half 1 the rest.
inline Rows half_rows(std::int64_t len, int c) {
  const std::int64_t first = (len + 1) / 2;
  return c == 0 ? Rows{0, first} : Rows{first, len - first};
}

class Builder;

/// Declares rank r's input "x" (and, unless `input_only`, its weight "w" and output "y") with
/// the shapes of its blocks of the global X, W and Y (workload::input_block, weight_block,
/// output_block), in that order.
void declare_operands(Builder& b, const workload::OperatorSpec& op, int r, bool input_only = false);

class Builder {
 public:
  Builder(const workload::OperatorSpec& op, const Strategy& strategy, const std::vector<int>& gpus);

  /// Declares buffer `name` of `rank`; names are unique per rank.
  void buffer(int rank, const std::string& name, std::int64_t rows, std::int64_t cols,
              BufferRole role);
  /// Full-width rows [rows.off, rows.off + rows.len) of buffer `name` of `rank`.
  Region rows(int rank, const std::string& name, Rows r) const;
  /// The whole buffer.
  Region whole(int rank, const std::string& name) const;

  /// Each emitter returns the task id, or -1 when the task would touch no element (skipped).
  int transfer(Region src, Region dst, int engine, int channel, int step, int chunk,
               std::string name);
  int gemm(int rank, Region a, Region b, Region c, int step, int chunk, std::string name);
  int add(int rank, Region src, Region dst, int step, int chunk, std::string name);
  int copy(Resource res, Region src, Region dst, int step, int chunk, std::string name);
  /// Puts gemm task `task` (an id returned above; -1 is ignored) into fused group `group`.
  void fuse(int task, int group);

  /// The finished schedule; copy_engines is the number of engines the tasks use (at least 1)
  /// and every task's launch is set (schedule::assign_launches).
  Schedule finish() &&;

 private:
  struct Access {
    int task;
    Region region;
    bool write;
  };
  /// Live accesses of one buffer, ordered by first row, so that finding the ones that overlap
  /// a region costs a logarithmic search plus the accesses near it (building a schedule stays
  /// n log n in tasks, not quadratic).
  struct AccessList {
    std::multimap<std::int64_t, Access> by_row;
    std::int64_t max_rows = 0;  ///< the most rows any access ever held (bounds the search)
    void add(const Access& a);
    /// Calls f(access) for every access whose rows intersect [row, row + rows).
    template <typename F>
    void for_each_near(std::int64_t row, std::int64_t rows, F&& f) const;
  };
  int emit(Task t);
  void access(int task, const Region& r, bool write, std::vector<int>& deps);

  Schedule s_;
  std::map<std::pair<int, std::string>, int> index_;
  // Per buffer, live accesses, writes and reads apart so a read scans only the writes (inputs
  // and weights are read by many tasks and never written).
  std::vector<AccessList> writes_;
  std::vector<AccessList> reads_;
};

}  // namespace compass::schedule::detail
