#include "compass/plan/te_model.hpp"

#include <algorithm>
#include <optional>

namespace compass::plan {

using schedule::Strategy;
using schedule::StrategyKind;

const std::vector<std::pair<std::string, std::string>>& te_bulk_pairs() {
  static const std::vector<std::pair<std::string, std::string>> pairs = {
      {"qkv_dgrad", "qkv_wgrad"}, {"fc1_dgrad", "fc1_wgrad"}};
  return pairs;
}

const std::vector<int>& te_bulk_sm_choices() {
  static const std::vector<int> sms = {2, 4, 8, 16, 24, 32};
  return sms;
}

double te_sm_copy_bandwidth_bytes_per_s(const hardware::Profile& p, int gpu) {
  const hardware::DeviceSpec& d = p.gpu_device(gpu);
  if (d.sm_count <= 0 || d.memory_bandwidth_bytes_per_s <= 0) return 0;
  return d.memory_bandwidth_bytes_per_s / d.sm_count;
}

namespace {

Result<model::Estimate> sequential(const hardware::Profile& p, const workload::OperatorSpec& op,
                                   const schedule::CommPlan& plan, model::Caches& caches) {
  return model::estimate(p, op, Strategy{StrategyKind::sequential, 0}, plan, caches);
}

// The operators a bulk phase reads: the GEMM's and the collective's sequential estimates (the
// collective in BF16 with `comm_bf16`).
struct BulkInputs {
  model::Estimate gemm, comm;
  workload::OperatorSpec comm_op;
};

Result<BulkInputs> bulk_inputs(const hardware::Profile& p, const workload::OperatorSpec& gemm_op,
                               const workload::OperatorSpec& comm_op,
                               const schedule::CommPlan& plan, bool comm_bf16,
                               model::Caches& caches) {
  BulkInputs in;
  COMPASS_ASSIGN(in.gemm, sequential(p, gemm_op, plan, caches));
  in.comm_op = comm_op;
  if (comm_bf16) in.comm_op.dtype = DType::bf16;
  COMPASS_ASSIGN(in.comm, sequential(p, in.comm_op, plan, caches));
  return in;
}

TeBulkPhase bulk_phase(const hardware::Profile& p, const BulkInputs& in,
                       const schedule::CommPlan& plan, int num_sm, bool set_sm_margin) {
  const model::Estimate& g = in.gemm;
  const model::Estimate& c = in.comm;
  const workload::OperatorSpec& cop = in.comm_op;
  const int gpu = plan.gpus.empty() ? 0 : plan.gpus.front();
  const int sms = p.gpu_device(gpu).sm_count;
  const int n = std::clamp(num_sm, 1, std::max(1, sms - 1));
  // The collective on n SMs: the model's link-bound time, or what n SMs can copy, if slower.
  const double bytes_per_rank = static_cast<double>(workload::rank_shapes(cop).comm_bytes) *
                                (cop.tp - 1) / std::max(1, cop.tp);
  const double sm_bw = te_sm_copy_bandwidth_bytes_per_s(p, gpu);
  const double sm_bound_s = sm_bw > 0 ? bytes_per_rank / (n * sm_bw) : 0;
  TeBulkPhase out;
  out.num_sm = num_sm;
  out.set_sm_margin = set_sm_margin;
  out.comm_s = std::max(c.comm_s, sm_bound_s) * p.interference.comm_slowdown_beside_gemm;
  // The GEMM loses n SMs: for its whole run with the margin, only while the collective runs
  // without it; and it is slowed by the memory traffic of the copies beside it.
  const double share = sms > n ? static_cast<double>(n) / (sms - n) : 0;
  double gemm = set_sm_margin ? g.compute_s * (1 + share)
                              : g.compute_s + std::min(out.comm_s, g.compute_s) * share;
  gemm += std::min(out.comm_s, gemm) * (p.interference.gemm_slowdown_sm_copy - 1);
  out.gemm_s = gemm;
  out.total_s = std::max(out.gemm_s, out.comm_s) + g.overhead_s + c.overhead_s;
  return out;
}

}  // namespace

Result<TeBulkPhase> te_bulk_phase(const hardware::Profile& p, const workload::OperatorSpec& gemm_op,
                                  const workload::OperatorSpec& comm_op,
                                  const schedule::CommPlan& plan, int num_sm, bool set_sm_margin,
                                  bool comm_bf16, model::Caches& caches) {
  COMPASS_ASSIGN(const BulkInputs in, bulk_inputs(p, gemm_op, comm_op, plan, comm_bf16, caches));
  return bulk_phase(p, in, plan, num_sm, set_sm_margin);
}

Result<TeBulkPhase> te_best_bulk_phase(const hardware::Profile& p,
                                       const workload::OperatorSpec& gemm_op,
                                       const workload::OperatorSpec& comm_op,
                                       const schedule::CommPlan& plan, bool comm_bf16,
                                       model::Caches& caches) {
  // The two estimates do not depend on the SMs: made once for every choice.
  COMPASS_ASSIGN(const BulkInputs in, bulk_inputs(p, gemm_op, comm_op, plan, comm_bf16, caches));
  std::optional<TeBulkPhase> best;
  for (int n : te_bulk_sm_choices())
    for (bool margin : {true, false}) {
      const TeBulkPhase ph = bulk_phase(p, in, plan, n, margin);
      if (!best || ph.total_s < best->total_s * (1 - 1e-9)) best = ph;
    }
  return *best;
}

Result<double> te_bf16_buffer_extra_s(const hardware::Profile& p, const workload::OperatorSpec& op,
                                      const schedule::CommPlan& plan, model::Caches& caches) {
  if (op.dtype != DType::fp8) return 0.0;
  workload::OperatorSpec bf = op;
  bf.dtype = DType::bf16;
  COMPASS_ASSIGN(const model::Estimate e8, sequential(p, op, plan, caches));
  COMPASS_ASSIGN(const model::Estimate e16, sequential(p, bf, plan, caches));
  return std::max(0.0, e16.comm_s - e8.comm_s);
}

double te_rs_dgrad_wgrad_s(const hardware::Profile& p, const model::Estimate& wgrad_seq,
                           double dgrad_s, double dgrad_comm_s) {
  const double gather_s = wgrad_seq.comm_s * p.interference.comm_slowdown_beside_gemm;
  const double both_s = std::max(dgrad_s, dgrad_comm_s + gather_s);
  return both_s - dgrad_s + wgrad_seq.compute_s + wgrad_seq.overhead_s;
}

}  // namespace compass::plan
