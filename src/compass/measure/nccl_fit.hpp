#pragma once
// nccl-tests logs (all_reduce_perf, all_gather_perf, reduce_scatter_perf, sendrecv_perf) and
// fitting a profile's link bandwidths and latencies to them on the profile's own layout.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "compass/hardware/profile.hpp"

namespace compass::measure {

enum class NcclTest { all_reduce, all_gather, reduce_scatter, sendrecv };
std::string_view to_string(NcclTest t);

/// One size of a log: out-of-place and in-place columns.
struct NcclRow {
  int line = 0;           ///< 1-based line in the log
  double size_bytes = 0;  ///< the "size" column (the gathered / reduced buffer)
  double time_us[2] = {0, 0};   ///< [0] out-of-place, [1] in-place
  double algbw[2] = {0, 0};     ///< GB/s
  double busbw[2] = {0, 0};     ///< GB/s
};

struct NcclLog {
  std::string origin;
  NcclTest test = NcclTest::all_reduce;
  int ranks = 0;
  std::vector<int> devices;        ///< CUDA device of each rank ("device N" in the header)
  std::vector<std::string> hosts;  ///< host of each rank
  std::string device_name;         ///< e.g. "NVIDIA GeForce RTX 4090"
  std::vector<NcclRow> rows;
  std::vector<std::string> notes;  ///< how the test and rank count were known
};

/// Bounds on the numbers of a log: anything outside them is not a measurement (a size beyond
/// any GPU's memory, a bandwidth a hundred times any link's, a time beyond a test's run).
inline constexpr double kMaxNcclSizeBytes = 1099511627776.0;  // 1 TiB
inline constexpr double kMaxNcclBandwidthGbps = 1e5;          // GB/s: 100 TB/s
inline constexpr double kMaxNcclTimeUs = 1e9;                 // 1000 s

/// Parses one log. Errors (one line, naming the file and line): empty or no data rows, a
/// failed run ("Test NCCL failure", "Out of bounds values : N FAILED"), a row whose #wrong
/// column is not 0, rows that do not match the column header, a test that cannot be told, a
/// size that is not a whole number of bytes in 1..kMaxNcclSizeBytes, a time outside
/// (0, kMaxNcclTimeUs] or a bandwidth outside [0, kMaxNcclBandwidthGbps].
Result<NcclLog> parse_nccl_tests_log(std::string_view text, std::string_view origin);

/// busbw / algbw for a test on n ranks, as nccl-tests computes it.
double busbw_factor(NcclTest t, int n);

/// The predicted time of one row's collective on profile `p` for the log's ranks.
double predicted_time_s(const hardware::Profile& p, const NcclLog& log, double size_bytes);

struct FitPoint {
  double size_bytes = 0;
  double measured_busbw = 0;   ///< GB/s, out-of-place
  double before_busbw = 0;     ///< predicted by the given profile
  double after_busbw = 0;      ///< predicted by the fitted profile
  bool large = false;          ///< used for the bandwidth fit
};

struct LinkChange {
  std::string link;
  double bandwidth_before = 0, bandwidth_after = 0;  ///< forward direction, bytes/s
  double latency_before = 0, latency_after = 0;
  std::string why;
};

struct LogFit {
  std::string origin;
  NcclTest test = NcclTest::all_reduce;
  int ranks = 0;
  std::vector<int> gpus;       ///< GPU ordinals the ranks ran on
  std::vector<FitPoint> points;
  double large_max_error = 0;  ///< max |after - measured| / measured over the large sizes
  std::vector<std::string> unexplained;  ///< what the layout cannot explain
};

struct FitResult {
  hardware::Profile profile;
  std::vector<LogFit> logs;
  std::vector<LinkChange> changes;
  std::vector<std::string> notes;
};

/// Fits `base`'s link bandwidths (links that bound each collective at large sizes) and
/// latencies (from the smallest sizes) so predicted times match the logs. The layout is kept:
/// no node, link or route is added. A bandwidth is never raised above the physical peak the
/// GPU table gives for its kind (PCIe generation x width; NVLink links x rate); when a
/// measurement would need more, the result says the layout cannot explain it.
Result<FitResult> fit_to_nccl_tests(const hardware::Profile& base, const std::vector<NcclLog>& logs);

}  // namespace compass::measure
