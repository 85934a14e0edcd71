#pragma once
// Tiny machines and hand-built schedules for the simulator tests.

#include <string>
#include <vector>

#include "compass/hardware/profile.hpp"
#include "compass/schedule/schedule.hpp"

namespace compass::backends::sim::testing {

/// A GPU spec with round numbers (1 TB/s memory, 100 TFLOP/s bf16, 2 copy engines).
hardware::DeviceSpec test_device();

/// `gpus` GPUs, each with one link (bandwidth `bw` per direction, latency `lat`) to a switch.
hardware::Profile star_profile(int gpus, double bw, double lat);

/// `gpus` GPUs on a ring: link i joins GPU i and GPU i+1 (bandwidth `bw` each way); only
/// neighbours have routes.
hardware::Profile ring_profile(int gpus, double bw, double lat);

/// Zero overheads and no interference, so times follow from bandwidth and latency alone.
void clear_overheads(hardware::Profile& p);

/// Builds schedules by hand: every rank owns "x" [rows, cols] (input) and "y" [rows*p, cols],
/// weight "w" [cols, 16*cols] and GEMM output "out" [rows*p, 16*cols]. Every task's launch
/// follows `kind` (schedule::assign_launches); a test may set one afterwards.
class ScheduleBuilder {
 public:
  ScheduleBuilder(int ranks, std::int64_t rows, std::int64_t cols,
                  schedule::StrategyKind kind = schedule::StrategyKind::fuse_ring);
  /// Sends `rows` rows of x of `from` into rows [slot*rows...) of y of `to`.
  int transfer(int from, int to, std::int64_t rows, int slot, std::vector<int> deps = {},
               int engine = 0, int step = -1, const std::string& name = "");
  /// A local copy on a copy engine of `rank` (x -> y).
  int local_copy(int rank, std::int64_t rows, std::vector<int> deps = {}, int engine = 0);
  /// y[0:m, 0:n] = x[0:m, 0:k] * w[0:k, 0:n] on rank's compute stream.
  int gemm(int rank, std::int64_t m, std::int64_t n, std::int64_t k, std::vector<int> deps = {});
  schedule::Schedule s;

 private:
  int add_task(schedule::Task t);
  std::int64_t rows_;
};

}  // namespace compass::backends::sim::testing
