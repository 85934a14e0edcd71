#pragma once
// Data-parallel gradient reduction and parameter gathering in buckets on one communication
// stream, overlapped with the backward / forward pass as Megatron-LM's --overlap-grad-reduce and
// --overlap-param-gather do: what is left exposed.

#include <vector>

namespace compass::job {

/// One bucket: when its data is ready (reduce) or needed (gather), and its collective's time.
struct Bucket {
  double at_s = 0;
  double comm_s = 0;
};

/// Reduce-scatter side: buckets leave in order, each when it is ready and the stream is free.
/// Returns how far the last one ends after `compute_end_s` (0 when hidden).
double exposed_reduce_s(const std::vector<Bucket>& ready, double compute_end_s);

/// Gather side: the stream starts at 0 and gathers buckets in order; compute needs bucket i at
/// `at_s` (on an undelayed timeline). Returns the delay the compute suffers: the largest lateness
/// of any bucket (0 when every bucket arrives in time).
double exposed_gather_s(const std::vector<Bucket>& needed);

}  // namespace compass::job
