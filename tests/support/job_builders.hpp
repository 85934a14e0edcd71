#pragma once
// Builders shared by the tests of the whole-job layers (job, backends/sim's job simulation,
// study): a built-in cluster with a built-in model, and a layout from its degrees. Header-only;
// include as "support/job_builders.hpp".

#include <cstdint>
#include <string>

#include "compass/job/cluster.hpp"
#include "compass/job/layout.hpp"
#include "compass/job/search.hpp"
#include "compass/workload/model_config.hpp"

namespace compass::testing {

/// A built-in cluster and a built-in model (the test fails on an unknown name).
struct BuiltinJob {
  job::Cluster cluster;
  workload::ModelConfig model;
  job::Searcher searcher() const { return job::Searcher(cluster, model); }
};
inline BuiltinJob builtin_job(const std::string& cluster, const std::string& model) {
  return BuiltinJob{job::builtin_cluster(cluster).value(), workload::resolve_model(model).value()};
}

/// TP x PP x DP with global batch `gb` at sequence `seq`, sequence parallel where TP > 1, the
/// other knobs at their defaults.
inline job::Layout layout_of(int tp, int pp, int dp, int gb, std::int64_t seq = 2048) {
  job::Layout l;
  l.tp = tp;
  l.pp = pp;
  l.dp = dp;
  l.global_batch = gb;
  l.seq = seq;
  l.sequence_parallel = tp > 1;
  return l;
}

}  // namespace compass::testing
