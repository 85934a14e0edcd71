#pragma once
// Emulated links for the CPU executor: every directed link of a Profile is a
// resource; a transfer occupies every hop of its route and completes after the route latency
// plus bytes / bandwidth, with max-min fair sharing among the concurrent transfers, re-shared
// whenever one starts or finishes. The bytes are really copied (at the start); the copy-engine
// thread then blocks on a condition variable until its paced completion time (no busy spin).
//
// The pacing math lives in LinkPacer, which takes the time as an argument, so tests check it
// on a virtual clock; PacedLinkEngine wraps it with a mutex, a steady clock and a
// condition variable shared by all copy-engine threads. docs/cpu-backend.md, "Emulated links".

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "compass/backends/cpu/transfer_engine.hpp"
#include "compass/core/result.hpp"
#include "compass/hardware/profile.hpp"

namespace compass::backends::cpu {

/// Pacing state of concurrent transfers on a Profile's links; not thread-safe, no clock.
class LinkPacer {
 public:
  /// Ranks map to GPUs rank_gpus[r]; every bandwidth is multiplied by link_scale (> 0).
  /// Errors: a GPU the profile lacks, a non-positive scale, a route with a zero-capacity hop.
  static Result<LinkPacer> create(const hardware::Profile& p, std::vector<int> rank_gpus,
                                  double link_scale);

  /// Starts a transfer of `bytes` from src_rank to dst_rank at time now_s; returns its id.
  /// The byte phase begins after the route latency; a same-GPU transfer takes no time.
  int start(double now_s, int src_rank, int dst_rank, double bytes);
  /// Completion time of transfer `id` under the current sharing (changes when others start
  /// or finish). now_s must not precede the last event.
  double finish_time_s(int id) const;
  /// Removes transfer `id` (its completion time has passed) and re-shares at now_s.
  void finish(double now_s, int id);
  /// Current rate of transfer `id` in bytes/s (0 while in its latency phase or when done).
  double rate(int id) const;
  /// Transfers not yet finished.
  int active() const;

 private:
  struct Flow {
    std::vector<int> dirs;    // link directions (hardware::sharing::dir_id)
    double byte_start_s = 0;  // start + route latency
    double remaining = 0;     // bytes not yet moved at last_s_
    double rate = 0;
    bool live = false;
  };
  void advance(double now_s);
  void reshare(double now_s);

  std::vector<double> cap_;                          // capacity of every link direction, scaled
  std::vector<std::vector<std::vector<int>>> dirs_;  // [src_rank][dst_rank] route
  std::vector<std::vector<double>> latency_s_;       // [src_rank][dst_rank]
  std::vector<Flow> flows_;
  double last_s_ = 0;
};

/// A TransferEngine whose transfers take the time the emulated links would take.
class PacedLinkEngine final : public TransferEngine {
 public:
  /// As LinkPacer::create; the clock starts now.
  static Result<std::shared_ptr<PacedLinkEngine>> create(const hardware::Profile& p,
                                                         std::vector<int> rank_gpus,
                                                         double link_scale);
  /// Copies the bytes, then waits until the paced completion (returns early on stop).
  void transfer(const TransferRequest& request, std::stop_token stop) override;

  explicit PacedLinkEngine(LinkPacer pacer);

 private:
  double now_s() const;
  std::mutex mutex_;
  std::condition_variable_any changed_;
  LinkPacer pacer_;
  std::uint64_t generation_ = 0;  // bumped on every start and finish (guarded by mutex_)
  std::chrono::steady_clock::time_point epoch_;
};

/// A copy of `p` with every link bandwidth (both directions) multiplied by `factor`.
hardware::Profile scale_links(const hardware::Profile& p, double factor);

}  // namespace compass::backends::cpu
