#pragma once
// Prices what TransformerEngine's userbuffers offer beyond Compass's own strategies, from the
// model's per-operator estimates (model/estimate.hpp): bulk overlap (a collective beside an
// independent GEMM of the same layer, on num_sm SMs, with or without set_sm_margin) and the
// reduce-scatter buffers TE keeps in BF16 in an FP8 run unless fp8_buf is set. Formulas and
// assumptions: docs/te-export.md, "How TE's settings are priced".

#include <string>
#include <utility>
#include <vector>

#include "compass/core/result.hpp"
#include "compass/hardware/profile.hpp"
#include "compass/model/caches.hpp"
#include "compass/model/estimate.hpp"
#include "compass/schedule/generate.hpp"
#include "compass/workload/operator.hpp"

namespace compass::plan {

/// TE's defaults for a bulk communicator (and for pipeline): 16 SMs, with the SM margin.
inline constexpr int kTeDefaultSm = 16;
inline constexpr bool kTeDefaultSmMargin = true;

/// The column-parallel backward pairs TE overlaps in bulk by default, as (data gradient, weight
/// gradient) roles: the input all-gather runs beside the data-gradient GEMM, the data
/// gradient's reduce-scatter beside the weight-gradient GEMM.
const std::vector<std::pair<std::string, std::string>>& te_bulk_pairs();

/// The SM counts the export tries for a bulk communicator: multiples of TE's default cluster
/// size of 2, up to TE's limit of 32 communication SMs.
const std::vector<int>& te_bulk_sm_choices();

/// Bytes per second one SM moves when it copies: its share of the device memory bandwidth
/// (memory_bandwidth / sm_count of GPU `gpu`); 0 when the profile lacks either number.
double te_sm_copy_bandwidth_bytes_per_s(const hardware::Profile& p, int gpu);

/// One bulk phase: a GEMM and, beside it, a collective TE runs on num_sm SMs.
struct TeBulkPhase {
  int num_sm = 16;
  bool set_sm_margin = true;
  double gemm_s = 0;   ///< the GEMM with the SMs it loses and the interference it suffers
  double comm_s = 0;   ///< the collective on num_sm SMs, slowed by the GEMM beside it
  double total_s = 0;  ///< max(gemm_s, comm_s) plus both operators' launch overheads
};

/// The time of `gemm_op`'s GEMM with `comm_op`'s collective beside it (bulk overlap) on `plan`,
/// for one SM count and margin. `comm_bf16`: the collective moves 2-byte elements whatever
/// comm_op's dtype. The estimates memoise through `caches`. Errors: those of model::estimate.
Result<TeBulkPhase> te_bulk_phase(const hardware::Profile& p, const workload::OperatorSpec& gemm_op,
                                  const workload::OperatorSpec& comm_op,
                                  const schedule::CommPlan& plan, int num_sm, bool set_sm_margin,
                                  bool comm_bf16, model::Caches& caches);

/// The fastest bulk phase over te_bulk_sm_choices() x {margin, no margin} (ties: fewer SMs).
Result<TeBulkPhase> te_best_bulk_phase(const hardware::Profile& p,
                                       const workload::OperatorSpec& gemm_op,
                                       const workload::OperatorSpec& comm_op,
                                       const schedule::CommPlan& plan, bool comm_bf16,
                                       model::Caches& caches);

/// The extra time of `op`'s collective when TE moves it in BF16 although op's GEMM runs in FP8
/// (reduce-scatter buffers without fp8_buf): the sequential collective's time in BF16 minus in
/// FP8 (0 for a non-FP8 op). Added in full to an overlapped setting's time, so an upper bound
/// there. The estimates memoise through `caches`. Errors: those of model::estimate.
Result<double> te_bf16_buffer_extra_s(const hardware::Profile& p, const workload::OperatorSpec& op,
                                      const schedule::CommPlan& plan, model::Caches& caches);

/// Megatron-LM's rs-dgrad layout for one column-parallel layer, the part beside the data
/// gradient's overlapped reduce-scatter (which takes `dgrad_s` and whose collective alone takes
/// `dgrad_comm_s`): NCCL gathers the layer input beside it on the same links, so the two
/// collectives together take at least the sum of their times; what outlasts `dgrad_s` is
/// exposed, then the weight-gradient GEMM runs. `wgrad_seq` is the sequential estimate of the
/// all-gather + weight-gradient operator.
double te_rs_dgrad_wgrad_s(const hardware::Profile& p, const model::Estimate& wgrad_seq,
                           double dgrad_s, double dgrad_comm_s);

}  // namespace compass::plan
