#pragma once
// Strategy estimates: the predicted time of one TP operator under one strategy, modelled step
// by step on the same pattern the schedule generators build (schedule/generate.hpp), with a
// breakdown into compute, exposed communication, overheads and interference.
// Formulas: docs/model.md, "Strategy estimates".

#include <string>
#include <vector>

#include "compass/hardware/profile.hpp"
#include "compass/model/caches.hpp"
#include "compass/schedule/generate.hpp"
#include "compass/schedule/strategy.hpp"
#include "compass/workload/operator.hpp"

namespace compass::model {

/// Switches for what-if evaluation and for the breakdown (both on for a real estimate).
struct ModelKnobs {
  bool interference = true;  ///< apply Profile::interference factors
  bool overheads = true;     ///< launches, flag waits, copy issue
};

/// A predicted time with its breakdown. total = compute + exposed_comm + overhead + interference
/// (to rounding: each part is worked out on its own).
struct Estimate {
  schedule::Strategy strategy;
  double total_s = 0;
  double compute_s = 0;       ///< GEMM (and reduction-add) work alone on one rank
  double exposed_comm_s = 0;  ///< time not hidden under compute (fill, drain, comm-bound steps)
  double overhead_s = 0;      ///< launches, flag waits, copy issue
  double interference_s = 0;  ///< added by compute/communication slowing each other
  double comm_s = 0;          ///< the communication alone (no overlap, no interference)
  std::string bottleneck;     ///< busiest link direction of the pattern ("" without comm)
  std::vector<std::string> congested;  ///< fuse:all2all: link directions loaded beyond the ring's
};

/// Predicts `op` under `strategy` with the communication orders of `plan` (rank numbers; GPUs
/// plan.gpus), memoising through `caches`. Errors: invalid op, a plan whose size differs from
/// op.tp or names GPUs the profile lacks, decompose parts that do not divide the rows each rank
/// owns.
Result<Estimate> estimate(const hardware::Profile& p, const workload::OperatorSpec& op,
                          const schedule::Strategy& strategy, const schedule::CommPlan& plan,
                          Caches& caches);
/// The same with caches of its own (a cold start).
Result<Estimate> estimate(const hardware::Profile& p, const workload::OperatorSpec& op,
                          const schedule::Strategy& strategy, const schedule::CommPlan& plan);

/// The estimate without the split of what is not compute: total_s, compute_s and, with
/// `communication`, comm_s, bottleneck and congested, as estimate() gives them (the rest stays
/// 0), from one evaluation where estimate() makes three. Same errors.
Result<Estimate> estimate_without_split(const hardware::Profile& p,
                                        const workload::OperatorSpec& op,
                                        const schedule::Strategy& strategy,
                                        const schedule::CommPlan& plan, Caches& caches,
                                        bool communication = true);

/// The total time only, under the given knobs (same errors as estimate()).
Result<double> estimate_time_s(const hardware::Profile& p, const workload::OperatorSpec& op,
                               const schedule::Strategy& strategy, const schedule::CommPlan& plan,
                               const ModelKnobs& knobs, Caches& caches);
/// The same with caches of its own (a cold start).
Result<double> estimate_time_s(const hardware::Profile& p, const workload::OperatorSpec& op,
                               const schedule::Strategy& strategy, const schedule::CommPlan& plan,
                               const ModelKnobs& knobs);

/// The link directions fuse:all2all loads beyond the busiest direction of the plan's one-way ring
/// moving the same data (busiest first), and the all2all bottleneck. Errors as estimate().
Result<std::vector<std::string>> all2all_congested_links(const hardware::Profile& p,
                                                         const workload::OperatorSpec& op,
                                                         const schedule::CommPlan& plan,
                                                         Caches& caches);

/// Per-part times of decompose:d before pipelining (overheads included, no interference).
struct DecomposeParts {
  double comm_part_s = 0;   ///< one part's collective, launch included
  double gemm_part_s = 0;   ///< one part's GEMM, launch included
  bool comm_first = true;   ///< ag_gemm: collective then GEMM; gemm_rs/ar: GEMM then collective
  double gemm_slowdown = 1; ///< factor on a GEMM beside a collective (copy-engine transfers)
  double comm_slowdown = 1; ///< factor on a collective beside a GEMM
};
/// The parts of decompose:d (d must divide workload::rows_per_rank(op); op and plan valid).
DecomposeParts decompose_parts(const hardware::Profile& p, const workload::OperatorSpec& op,
                               int d, const schedule::CommPlan& plan, Caches& caches);

}  // namespace compass::model
