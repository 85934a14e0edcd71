#include "compass/plan/te_export.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <set>

#include "compass/hardware/rings.hpp"
#include "compass/model/estimate.hpp"
#include "compass/model/selector.hpp"
#include "compass/plan/megatron_flags.hpp"
#include "compass/plan/te_model.hpp"

namespace compass::plan {

using schedule::Strategy;
using schedule::StrategyKind;

std::string_view to_string(TeMethod m) {
  switch (m) {
    case TeMethod::ring_exchange: return "ring_exchange";
    case TeMethod::pipeline: return "pipeline";
    case TeMethod::bulk: return "bulk";
  }
  return "?";
}

std::optional<TeMethod> parse_te_method(std::string_view s) {
  if (s == "ring_exchange") return TeMethod::ring_exchange;
  if (s == "pipeline") return TeMethod::pipeline;
  if (s == "bulk") return TeMethod::bulk;
  return std::nullopt;
}

namespace {

// Layers whose TE communicator is an all-gather in every configuration.
const std::set<std::string>& ag_layers() {
  static const std::set<std::string> s = {"qkv_fprop", "fc1_fprop", "proj_dgrad", "fc2_dgrad"};
  return s;
}
// Forward layers whose communicator is a reduce-scatter after the GEMM.
const std::set<std::string>& rs_fprop_layers() {
  static const std::set<std::string> s = {"proj_fprop", "fc2_fprop"};
  return s;
}
// Column-parallel data gradients: bulk all-gather of the input beside the dgrad GEMM, or (with
// Megatron-LM's rs-dgrad switch) a reduce-scatter overlapped with the dgrad GEMM.
const std::set<std::string>& dgrad_layers() {
  static const std::set<std::string> s = {"qkv_dgrad", "fc1_dgrad"};
  return s;
}
// Bulk reduce-scatter of the column-parallel data gradient beside the weight-gradient GEMM.
const std::set<std::string>& wgrad_layers() {
  static const std::set<std::string> s = {"qkv_wgrad", "fc1_wgrad"};
  return s;
}
// All-gather layer -> reduce-scatter layer of the same TP block (atomic GEMM pairs): forward,
// the input all-gather before the column-parallel GEMM and the reduce-scatter after the
// row-parallel one; backward, the output-gradient all-gather before the row-parallel data
// gradient and the reduce-scatter after the column-parallel data gradient that follows it.
const std::map<std::string, std::string>& block_pairs() {
  static const std::map<std::string, std::string> m = {{"qkv_fprop", "proj_fprop"},
                                                       {"fc1_fprop", "fc2_fprop"},
                                                       {"proj_dgrad", "qkv_dgrad"},
                                                       {"fc2_dgrad", "fc1_dgrad"}};
  return m;
}

std::string wgrad_of(const std::string& dgrad) {
  return dgrad.substr(0, dgrad.size() - 5) + "wgrad";
}

// TE's defaults for a method: ring exchange runs on one SM without a cluster or SM margin and
// always takes tp steps; the other methods use 16 SMs in clusters of 2, reserve them from the
// GEMM and split into 4.
TeEntry entry_for_method(const std::string& name, TeMethod m, int tp) {
  TeEntry e;
  e.name = name;
  e.method = m;
  const bool ring = m == TeMethod::ring_exchange;
  e.num_sm = ring ? 1 : kTeDefaultSm;
  e.cga_size = ring ? 1 : 2;
  e.set_sm_margin = ring ? false : kTeDefaultSmMargin;
  e.num_splits = ring ? tp : 4;
  return e;
}

}  // namespace

bool te_cuda_multicast(const hardware::Profile& p, const std::vector<int>& gpus) {
  for (int g : gpus) {
    const std::string& arch = p.gpu_device(g).arch;  // "sm_90"
    int cc = 0;
    if (arch.rfind("sm_", 0) == 0)
      for (char c : arch.substr(3)) {
        if (c < '0' || c > '9') break;
        cc = cc * 10 + (c - '0');
      }
    if (cc < 90) return false;
  }
  for (int a : gpus)
    for (int b : gpus) {
      if (a == b) continue;
      bool via_switch = false;
      for (const hardware::Hop& h : p.route(a, b).hops) {
        const hardware::Link& l = p.links[static_cast<std::size_t>(h.link)];
        via_switch |= l.kind == hardware::LinkKind::nvswitch ||
                      p.nodes[static_cast<std::size_t>(l.a)].kind == hardware::NodeKind::nvswitch ||
                      p.nodes[static_cast<std::size_t>(l.b)].kind == hardware::NodeKind::nvswitch;
      }
      if (!via_switch) return false;
    }
  return true;
}

std::string shell_quote(std::string_view s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') out += "'\\''";
    else out += c;
  }
  return out + "'";
}

std::string shell_word(std::string_view s) {
  const auto plain = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           std::string_view("_@%+=:,./-").find(c) != std::string_view::npos;
  };
  if (!s.empty() && std::all_of(s.begin(), s.end(), plain)) return std::string(s);
  return shell_quote(s);
}

std::string shell_line(const std::vector<std::string>& words) {
  std::string out;
  for (const std::string& w : words) out += (out.empty() ? "" : " ") + shell_word(w);
  return out;
}

std::vector<std::string> te_keys_read(std::string_view name, TeMethod method, bool fp8) {
  std::vector<std::string> keys = {"method", "num_sm", "cga_size", "set_sm_margin"};
  const std::string n(name);
  switch (method) {
    case TeMethod::ring_exchange:
      keys.insert(keys.end(), {"atomic_gemm", "use_ce"});
      if (ag_layers().count(n)) keys.push_back("aggregate");
      break;
    case TeMethod::pipeline:
      keys.insert(keys.end(), {"num_splits", "atomic_gemm"});
      if (fp8) keys.push_back("fp8_buf");
      break;
    case TeMethod::bulk: break;
  }
  return keys;
}

const std::vector<std::string>& te_layer_names() {
  static const std::vector<std::string> names = {
      "qkv_fprop", "proj_fprop", "fc1_fprop", "fc2_fprop", "fc2_dgrad",
      "fc1_dgrad", "fc1_wgrad",  "proj_dgrad", "qkv_dgrad", "qkv_wgrad"};
  return names;
}

std::optional<TeEntry> te_default_entry(std::string_view name, int tp) {
  const std::string n(name);
  if (ag_layers().count(n)) return entry_for_method(n, TeMethod::ring_exchange, tp);
  if (rs_fprop_layers().count(n)) return entry_for_method(n, TeMethod::pipeline, tp);
  if (dgrad_layers().count(n) || wgrad_layers().count(n))
    return entry_for_method(n, TeMethod::bulk, tp);
  return std::nullopt;
}

Status validate_te_config(const std::vector<TeEntry>& entries, const TeRuntime& rt) {
  if (rt.tp < 2) return make_error("tp={}: there is no TP communication to overlap", rt.tp);
  std::map<std::string, const TeEntry*> by_name;
  for (const TeEntry& e : entries) {
    if (!te_default_entry(e.name, rt.tp))
      return make_error("{}: unknown layer (expected one of qkv_fprop, proj_fprop, fc1_fprop, "
                        "fc2_fprop, qkv_dgrad, qkv_wgrad, proj_dgrad, fc1_dgrad, fc1_wgrad, "
                        "fc2_dgrad)",
                        e.name);
    if (!by_name.emplace(e.name, &e).second)
      return make_error("{}: configured twice", e.name);
  }
  for (const TeEntry& e : entries) {
    const std::string& n = e.name;
    const std::string_view method = to_string(e.method);
    if (ag_layers().count(n) && e.method != TeMethod::ring_exchange)
      return make_error("{}: method {} is not supported on an all-gather layer (ring_exchange "
                        "is the only overlap TE runs there)",
                        n, method);
    if (rs_fprop_layers().count(n) && e.method == TeMethod::bulk)
      return make_error("{}: method bulk is not supported on a GEMM -> reduce-scatter layer "
                        "(use pipeline or ring_exchange)",
                        n);
    if (wgrad_layers().count(n) && e.method != TeMethod::bulk)
      return make_error("{}: method {} is not supported (only bulk: the reduce-scatter of the "
                        "data gradient beside the weight-gradient GEMM)",
                        n, method);
    if (dgrad_layers().count(n)) {
      const bool bulk = e.method == TeMethod::bulk;
      if (!bulk && by_name.count(wgrad_of(n)))
        return make_error("{}: {} may not be configured when {} uses a non-bulk method ({})",
                          wgrad_of(n), wgrad_of(n), n, method);
      if (!bulk && !rt.rs_dgrad)
        return make_error("{}: method {} needs Megatron-LM's --tp-comm-overlap-rs-dgrad", n,
                          method);
      if (bulk && rt.rs_dgrad)
        return make_error("{}: --tp-comm-overlap-rs-dgrad needs a non-bulk method here "
                          "(ring_exchange or pipeline)",
                          n);
    }
    if (e.method == TeMethod::pipeline) {
      if (e.num_splits < 1) return make_error("{}: num_splits={} must be at least 1", n, e.num_splits);
      if (rt.rows_per_rank > 0 && rt.rows_per_rank % e.num_splits != 0)
        return make_error("{}: num_splits={} does not divide the {} rows each rank owns", n,
                          e.num_splits, rt.rows_per_rank);
    }
    if (e.method == TeMethod::ring_exchange && e.num_splits != rt.tp)
      return make_error("{}: ring_exchange always takes tp={} steps, num_splits={} would be "
                        "ignored",
                        n, rt.tp, e.num_splits);
    if (e.num_sm < 1) return make_error("{}: num_sm={} must be at least 1", n, e.num_sm);
    if (e.cga_size != 1 && e.cga_size != 2 && e.cga_size != 4 && e.cga_size != 8)
      return make_error("{}: cga_size={} must be 1, 2, 4 or 8", n, e.cga_size);
    if (e.num_sm % e.cga_size != 0)
      return make_error("{}: num_sm={} is not a multiple of cga_size={} (TE would silently "
                        "drop the cluster)",
                        n, e.num_sm, e.cga_size);
    if (e.aggregate) {
      if (e.method != TeMethod::ring_exchange || !ag_layers().count(n))
        return make_error("{}: aggregate applies only to ring_exchange all-gather layers", n);
      if (rt.tp % 2 != 0) return make_error("{}: aggregate needs an even tp (got {})", n, rt.tp);
    }
    if (e.atomic_gemm) {
      if (!rt.fp8) return make_error("{}: atomic_gemm needs FP8 GEMMs", n);
      if (e.method == TeMethod::bulk)
        return make_error("{}: atomic_gemm is not supported with method bulk", n);
      if (rt.first_last_bf16)
        return make_error("{}: atomic_gemm cannot be used with --first-last-layers-bf16 (TE "
                          "builds the BF16 layers' communicators from the same configuration "
                          "and refuses atomic GEMM outside FP8)",
                          n);
    }
    if (e.fp8_buf) {
      if (!rt.fp8) return make_error("{}: fp8_buf needs FP8 GEMMs", n);
      if (e.method != TeMethod::pipeline || ag_layers().count(n) || wgrad_layers().count(n))
        return make_error("{}: fp8_buf applies only to a pipeline reduce-scatter layer (TE "
                          "ignores it elsewhere)",
                          n);
    }
    if (rt.first_last_bf16 && dgrad_layers().count(n) && e.method != TeMethod::bulk)
      return make_error("{}: method {} cannot be used with --first-last-layers-bf16: TE builds "
                        "a second (BF16) set of communicators from the same configuration and "
                        "fails re-applying a non-bulk data-gradient method; keep it bulk",
                        n, method);
  }
  // A TP block's all-gather and reduce-scatter layers must agree on atomic ring exchange:
  // the all-gather side shuffles chunk outputs that only the reduce-scatter side restores. TE
  // itself checks the forward pairs only; the backward pairs follow the same data path.
  for (const auto& [ag, rs] : block_pairs()) {
    auto atomic_ring = [&](const std::string& n) {
      auto it = by_name.find(n);
      return it != by_name.end() && it->second->atomic_gemm &&
             it->second->method == TeMethod::ring_exchange;
    };
    if (atomic_ring(ag) != atomic_ring(rs)) {
      const std::string& on = atomic_ring(ag) ? ag : rs;
      const std::string& off = atomic_ring(ag) ? rs : ag;
      return make_error("{}: uses atomic_gemm with ring_exchange, so its pair {} must too", on,
                        off);
    }
  }
  // Megatron-LM's rs-dgrad switch covers both column-parallel layers at once.
  if (rt.rs_dgrad)
    for (const std::string& n : dgrad_layers())
      if (!by_name.count(n))
        return make_error("{}: --tp-comm-overlap-rs-dgrad needs an entry with a non-bulk method",
                          n);
  return Status::success();
}

namespace {

// A TE setting for one operator: method (or off) and splits, the strategy the model predicts it
// as, and its predicted time.
struct Candidate {
  std::string label;  // "ring_exchange", "pipeline:4", "bulk", "off", "nccl"
  TeMethod method = TeMethod::ring_exchange;
  int splits = 0;
  Strategy as;
  double time_s = 0;
  bool faithful = true;  // TE runs the strategy it is predicted as (not only a look-alike)
  bool fp8_buf = false;  // pipeline reduce-scatter in an FP8 buffer
  int num_sm = 0;        // bulk: the SMs chosen (0: TE's default)
  bool sm_margin = true;  // bulk: set_sm_margin chosen
  double bf16_extra_s = 0;  // added because TE moves this collective in BF16 in an FP8 run
};

std::string strategy_label_for_te_default(const Strategy& s) {
  switch (s.kind) {
    case StrategyKind::fuse_ring: return "ring_exchange";
    case StrategyKind::decompose: return fmt::format("pipeline:{}", s.parts);
    default: return "bulk";
  }
}

Result<Candidate> make_candidate(const hardware::Profile& p, const workload::OperatorSpec& op,
                                 const schedule::CommPlan& plan, std::string label, TeMethod method,
                                 int splits, Strategy as, model::Caches& caches,
                                 double extra_s = 0) {
  COMPASS_ASSIGN(const double t,
                 model::estimate_time_s(p, op, as, plan, model::ModelKnobs{}, caches));
  Candidate c{std::move(label), method, splits, as, t + extra_s, true};
  c.bf16_extra_s = extra_s;
  return c;
}

// Overlapping settings TE can run for a GEMM -> reduce-scatter operator, fastest first. In an
// FP8 run TE's reduce-scatter buffers are BF16 except a pipeline's with fp8_buf, which the
// export sets where `fp8_buf_ok` (the forward reduce-scatter layers).
Result<std::vector<Candidate>> rs_candidates(const hardware::Profile& p, const PlannedOp& po,
                                             const schedule::CommPlan& plan, int tp,
                                             bool fp8_buf_ok, model::Caches& caches) {
  const workload::OperatorSpec& op = po.choice.op;
  const std::int64_t rows = workload::rows_per_rank(op);
  const bool fp8 = op.dtype == DType::fp8;
  COMPASS_ASSIGN(const double bf16_extra, te_bf16_buffer_extra_s(p, op, plan, caches));
  std::set<int> degrees;
  const Strategy& chosen = po.compass().strategy;
  if (chosen.kind == StrategyKind::decompose) degrees.insert(chosen.parts);
  for (int d : {po.choice.odp.d_closed, po.choice.odp.d_argmin, 2, 4, 8})
    if (d >= 2) degrees.insert(d);
  std::vector<Candidate> out;
  for (int d : degrees) {
    if (rows % d != 0) continue;
    const bool buf8 = fp8 && fp8_buf_ok;
    COMPASS_ASSIGN(
        Candidate c,
        make_candidate(p, op, plan, fmt::format("pipeline:{}", d), TeMethod::pipeline, d,
                       Strategy{StrategyKind::decompose, d}, caches, buf8 ? 0.0 : bf16_extra));
    c.fp8_buf = buf8;
    c.faithful = buf8 || !fp8;
    out.push_back(std::move(c));
  }
  // TE's reduce-scatter ring exchange sends each GEMM chunk straight to the rank that owns it
  // (step i: to the rank i places ahead) and sums at the end: Compass's fuse:all2all pattern.
  COMPASS_ASSIGN(Candidate ring,
                 make_candidate(p, op, plan, "ring_exchange", TeMethod::ring_exchange, tp,
                                Strategy{StrategyKind::fuse_all2all, 0}, caches, bf16_extra));
  ring.faithful = false;  // TE sends to one peer per step, fuse:all2all to all at once
  out.push_back(std::move(ring));
  std::stable_sort(out.begin(), out.end(),
                   [](const Candidate& a, const Candidate& b) { return a.time_s < b.time_s; });
  return out;
}

// The RS candidate for Compass's exact choice when TE can run it as priced, else the fastest.
Candidate pick_rs(const PlannedOp& po, const std::vector<Candidate>& cands) {
  const Strategy& chosen = po.compass().strategy;
  for (const Candidate& c : cands)
    if (c.as == chosen && c.faithful) return c;
  return cands.front();
}

Candidate sequential_candidate(const PlannedOp& po, std::string label, TeMethod method,
                               double extra_s = 0) {
  Candidate c{std::move(label), method, 0, Strategy{StrategyKind::sequential, 0},
              po.megatron.total_s + extra_s, extra_s == 0};
  c.bf16_extra_s = extra_s;
  return c;
}

// A setting per Compass role.
using CandidateMap = std::map<std::string, Candidate>;

// The plan's operators by role, and what the export sets for each: the TE setting and the TE
// entry that carries it ("-" for none).
struct Choices {
  std::map<std::string, const PlannedOp*> ops;
  CandidateMap chosen;                         // Compass role -> exported setting
  std::map<std::string, std::string> carrier;  // Compass role -> TE entry name
};

// The checks on the plan and options, and the run's shape.
Result<TeExport> export_header(const LayerPlan& lp, const TeExportOptions& opt) {
  const int tp = lp.parallel.tp;
  if (!lp.parallel.sequence_parallel)
    return make_error("TE's tp-comm-overlap needs sequence parallelism (Megatron-LM requires "
                      "--sequence-parallel with --tp-comm-overlap); drop --no-sp");
  if (tp < 2) return make_error("tp={}: there is no TP communication to overlap", tp);
  if (opt.atomic_gemm && !opt.fp8)
    return make_error("--atomic-gemm needs FP8 GEMMs (--fp8): TE runs atomic GEMM only in FP8");
  if (opt.first_last_layers_bf16 && !opt.fp8)
    return make_error("--first-last-layers-bf16 needs --fp8 (it keeps the first and last layers "
                      "of an FP8 run in BF16)");
  if (opt.first_last_layers_bf16 && opt.atomic_gemm)
    return make_error("--atomic-gemm cannot be used with --first-last-layers-bf16: TE builds the "
                      "BF16 layers' communicators from the same configuration and refuses "
                      "atomic GEMM outside FP8");
  if (opt.delay_wgrad_compute)
    return make_error("--delay-wgrad-compute is not supported: TE refuses it beside the bulk "
                      "weight-gradient overlap, and Megatron-LM accepts it only with MoE "
                      "expert-parallel overlap, which Compass does not plan");
  if (opt.cp < 1) return make_error("--cp {}: the context-parallel size must be at least 1", opt.cp);
  TeExport ex;
  ex.profile = lp.profile;
  ex.model = lp.model.name;
  ex.tp = tp;
  ex.cp = opt.cp;
  ex.seq = lp.parallel.seq * opt.cp;
  ex.micro_batch = lp.parallel.micro_batch;
  ex.runtime.tp = tp;
  ex.runtime.rows_per_rank = lp.parallel.seq * lp.parallel.micro_batch / tp;
  ex.runtime.fp8 = opt.fp8;
  ex.runtime.first_last_bf16 = opt.first_last_layers_bf16;
  return ex;
}

// All-gather operators: ring exchange, or every one of them off.
Status choose_ag(const hardware::Profile& p, const schedule::CommPlan& plan, int tp, Choices& ch,
                 TeExport& ex, model::Caches& caches) {
  double seq_sum = 0, ring_sum = 0;
  CandidateMap ring;
  for (const std::string& r : ag_layers()) {
    const PlannedOp& po = *ch.ops[r];
    COMPASS_ASSIGN(Candidate c,
                   make_candidate(p, po.choice.op, plan, "ring_exchange", TeMethod::ring_exchange,
                                  tp, Strategy{StrategyKind::fuse_ring, 0}, caches));
    seq_sum += po.megatron.total_s;
    ring_sum += c.time_s;
    ring.emplace(r, std::move(c));
  }
  const bool off = seq_sum <= ring_sum;
  for (const std::string& r : ag_layers()) {
    ch.chosen[r] = off ? sequential_candidate(*ch.ops[r], "off", TeMethod::ring_exchange) : ring[r];
    ch.carrier[r] = r;
  }
  if (off) ex.megatron_args.push_back("--disable-tp-comm-overlap-ag");
  return {};
}

// Forward GEMM -> reduce-scatter operators: pipeline or ring exchange, or both off (NCCL then
// moves them in BF16 too in an FP8 run).
Status choose_rs_fprop(const hardware::Profile& p, const schedule::CommPlan& plan, int tp,
                       Choices& ch, TeExport& ex, model::Caches& caches) {
  double seq_sum = 0, best_sum = 0;
  CandidateMap best, seq;
  for (const std::string& r : rs_fprop_layers()) {
    const PlannedOp& po = *ch.ops.at(r);
    COMPASS_ASSIGN(const std::vector<Candidate> cands,
                   rs_candidates(p, po, plan, tp, true, caches));
    COMPASS_ASSIGN(const double extra, te_bf16_buffer_extra_s(p, po.choice.op, plan, caches));
    Candidate c = pick_rs(po, cands);
    best_sum += c.time_s;
    best.emplace(r, std::move(c));
    Candidate s = sequential_candidate(po, "off", TeMethod::pipeline, extra);
    seq_sum += s.time_s;
    seq.emplace(r, std::move(s));
  }
  const bool off = seq_sum <= best_sum;
  for (const std::string& r : rs_fprop_layers()) {
    ch.chosen[r] = off ? seq[r] : best[r];
    ch.carrier[r] = r;
  }
  if (off) ex.megatron_args.push_back("--disable-tp-comm-overlap-rs");
  return {};
}

// Column-parallel backward: bulk (TE's default, priced by te_model with its SMs chosen) or the
// data gradient's reduce-scatter overlapped with its own GEMM (--tp-comm-overlap-rs-dgrad),
// the input all-gather then left to NCCL beside it. rs-dgrad is exported only when it predicts
// faster than bulk beyond the selector's tie tolerance, and never with BF16 first/last layers.
Status choose_dgrad(const hardware::Profile& p, const schedule::CommPlan& plan, int tp, Choices& ch,
                    TeExport& ex, model::Caches& caches) {
  double bulk_sum = 0, rs_sum = 0;
  CandidateMap bulk, rs;
  for (const std::string& r : dgrad_layers()) {
    // Compass's *_dgrad is the data-gradient GEMM and the reduce-scatter of its output,
    // Compass's *_wgrad the all-gather of the layer input and the weight-gradient GEMM.
    const std::string w = wgrad_of(r);
    const PlannedOp& d = *ch.ops.at(r);
    const PlannedOp& g = *ch.ops.at(w);
    // Bulk: TE's *_dgrad communicator gathers the input beside the data-gradient GEMM (an FP8
    // buffer), its *_wgrad one reduce-scatters the data gradient beside the weight-gradient
    // GEMM (a BF16 buffer).
    COMPASS_ASSIGN(const TeBulkPhase ag,
                   te_best_bulk_phase(p, d.choice.op, g.choice.op, plan, false, caches));
    COMPASS_ASSIGN(const TeBulkPhase rsb,
                   te_best_bulk_phase(p, g.choice.op, d.choice.op, plan, true, caches));
    Candidate cw = sequential_candidate(g, "bulk", TeMethod::bulk);
    cw.time_s = ag.total_s;
    cw.faithful = false;
    cw.num_sm = ag.num_sm;
    cw.sm_margin = ag.set_sm_margin;
    Candidate cd = sequential_candidate(d, "bulk", TeMethod::bulk);
    cd.time_s = rsb.total_s;
    cd.faithful = false;
    cd.num_sm = rsb.num_sm;
    cd.sm_margin = rsb.set_sm_margin;
    bulk_sum += cw.time_s + cd.time_s;
    bulk.emplace(w, std::move(cw));
    bulk.emplace(r, std::move(cd));
    // rs-dgrad: the reduce-scatter overlapped with its GEMM; NCCL's all-gather of the input
    // runs beside it (credited in full, an optimistic bound), then the weight-gradient GEMM.
    COMPASS_ASSIGN(const std::vector<Candidate> cands,
                   rs_candidates(p, d, plan, tp, false, caches));
    Candidate c = pick_rs(d, cands);
    Candidate nccl = sequential_candidate(g, "nccl", TeMethod::bulk);
    nccl.time_s = te_rs_dgrad_wgrad_s(p, g.megatron, c.time_s, d.megatron.comm_s + c.bf16_extra_s);
    nccl.faithful = false;
    rs_sum += c.time_s + nccl.time_s;
    rs.emplace(r, std::move(c));
    rs.emplace(w, std::move(nccl));
  }
  ex.runtime.rs_dgrad =
      !ex.runtime.first_last_bf16 && rs_sum < bulk_sum * (1.0 - model::kTieTolerance);
  for (const std::string& r : dgrad_layers()) {
    const std::string w = wgrad_of(r);
    if (ex.runtime.rs_dgrad) {
      ch.chosen[r] = rs[r];
      ch.carrier[r] = r;
      ch.chosen[w] = rs[w];
      ch.carrier[w] = "-";
    } else {
      // The crossing: the data gradient's reduce-scatter rides TE's *_wgrad communicator, the
      // input all-gather TE's *_dgrad one.
      ch.chosen[r] = bulk[r];
      ch.carrier[r] = w;
      ch.chosen[w] = bulk[w];
      ch.carrier[w] = r;
    }
  }
  if (ex.runtime.rs_dgrad) ex.megatron_args.push_back("--tp-comm-overlap-rs-dgrad");
  return {};
}

// Atomic GEMM on every overlapped entry, except where its block pair's methods rule it out
// (said in a note): the all-gather and reduce-scatter sides of a pair run atomic ring exchange
// together or not at all.
void set_atomic_gemm(std::map<std::string, TeEntry>& entries, TeExport& ex) {
  for (auto& [n, e] : entries)
    if (e.method != TeMethod::bulk) e.atomic_gemm = true;
  for (const auto& [ag, rs] : block_pairs()) {
    auto it_a = entries.find(ag);
    auto it_b = entries.find(rs);
    const bool ring_a = it_a != entries.end() && it_a->second.method == TeMethod::ring_exchange;
    const bool ring_b = it_b != entries.end() && it_b->second.method == TeMethod::ring_exchange;
    if (ring_a != ring_b) {
      TeEntry& on = ring_a ? it_a->second : it_b->second;
      on.atomic_gemm = false;
      const auto other = ring_a ? it_b : it_a;
      ex.notes.push_back(fmt::format(
          "{} keeps atomic_gemm off: atomic ring exchange needs its pair {} on ring_exchange "
          "too, and it runs {}",
          on.name, ring_a ? rs : ag,
          other == entries.end() ? std::string("without a communicator")
                                 : std::string(to_string(other->second.method))));
    }
  }
}

// The configuration: every TE layer at its default, then the exported methods.
Status config_entries(const Choices& ch, int tp, const TeExportOptions& opt, TeExport& ex) {
  std::map<std::string, TeEntry> entries;
  for (const std::string& n : te_layer_names()) entries.emplace(n, *te_default_entry(n, tp));
  for (const auto& [role, c] : ch.chosen) {
    const std::string& n = ch.carrier.at(role);
    if (n == "-" || c.label == "off") continue;
    TeEntry e = entry_for_method(n, c.method, tp);
    if (c.method == TeMethod::pipeline) e.num_splits = c.splits;
    if (c.method == TeMethod::bulk && c.num_sm > 0) {
      e.num_sm = c.num_sm;
      e.set_sm_margin = c.sm_margin;
    }
    e.fp8_buf = c.fp8_buf;
    entries[n] = e;
  }
  if (ex.runtime.rs_dgrad)
    for (const std::string& w : wgrad_layers()) entries.erase(w);
  if (opt.atomic_gemm) set_atomic_gemm(entries, ex);
  for (const std::string& n : te_layer_names())
    if (entries.count(n)) ex.entries.push_back(entries.at(n));
  return validate_te_config(ex.entries, ex.runtime);
}

// Why the exported setting of `po` is not exactly Compass's choice (empty when it is).
std::string layer_note(const PlannedOp& po, const Candidate& c, const TeLayerReport& r) {
  if (r.exact) return "";
  if (c.label == "bulk")
    return fmt::format("TE's bulk overlap: this collective beside another GEMM of the layer on "
                       "{} SMs{} (te_model)",
                       c.num_sm, c.sm_margin ? ", reserved from the GEMM" : "");
  if (c.label == "nccl")
    return "NCCL all-gather beside the data-gradient GEMM, then the weight-gradient GEMM";
  if (c.label == "off") return "the whole direction is off: overlapping it predicts slower in sum";
  if (c.bf16_extra_s > 0 && c.method == TeMethod::pipeline)
    return "TE keeps this reduce-scatter's buffer in BF16 (no fp8_buf here): priced in BF16";
  if (c.method == TeMethod::ring_exchange && po.choice.op.kind != workload::OpKind::ag_gemm)
    return fmt::format("TE's reduce-scatter ring exchange sends to one peer per step; predicted "
                       "as fuse:all2all{}",
                       c.bf16_extra_s > 0 ? ", its BF16 buffer priced in BF16" : "");
  if (r.compass.kind == StrategyKind::sequential)
    return "TE cannot turn off one layer of a direction from the command line";
  if (r.compass.kind == StrategyKind::fuse_double_ring)
    return "TE has no double ring; nearest TE method";
  if (r.compass.kind == StrategyKind::decompose)
    return po.choice.op.kind == workload::OpKind::ag_gemm
               ? "TE rejects pipeline on all-gather layers; nearest TE method"
               : "nearest TE method";
  return "nearest TE method";
}

// Per-layer report, in the plan's operator order, and the sums.
Status report_layers(const LayerPlan& lp, const Choices& ch, TeExport& ex) {
  for (const PlannedOp& po : lp.ops) {
    const std::string& role = po.choice.op.role;
    const Candidate& c = ch.chosen.at(role);
    TeLayerReport r;
    r.role = role;
    r.te_entry = ch.carrier.at(role);
    r.compass = po.compass().strategy;
    r.compass_s = po.compass().total_s;
    r.exported = c.label == "bulk" ? fmt::format("bulk:{}sm", c.num_sm) : c.label;
    r.exported_as = c.as;
    r.exported_s = c.time_s;
    r.te_default = strategy_label_for_te_default(te_default_strategy(po.choice.op));
    // TE's default setting on the rank-order plan, bulk and BF16 buffers included (plan_layer).
    r.te_default_s = po.te.total_s;
    r.exact = c.as == r.compass && c.faithful;
    r.note = layer_note(po, c, r);
    ex.compass_s += r.compass_s;
    ex.exported_s += r.exported_s;
    ex.te_default_s += r.te_default_s;
    ex.layers.push_back(std::move(r));
  }
  return {};
}

// The TP groups the launch covers: the plan's group in its ring order, then the rest of the
// node's GPUs in ordinal order, tp at a time, each in its own topology-aware ring order (a
// local rank drives the visible device of its index, and Megatron-LM makes each tp
// consecutive ranks a TP group). Errors: a group whose GPUs lack peer access.
Result<std::vector<std::vector<int>>> tp_groups(const hardware::Profile& p, const LayerPlan& lp) {
  const int tp = lp.parallel.tp;
  std::vector<std::vector<int>> groups;
  std::vector<int> first;
  for (int r : lp.plan.ring) first.push_back(lp.plan.gpus[static_cast<std::size_t>(r)]);
  groups.push_back(first);
  std::vector<int> rest;
  for (int g = 0; g < p.gpu_count(); ++g)
    if (std::find(first.begin(), first.end(), g) == first.end()) rest.push_back(g);
  for (std::size_t i = 0; i + static_cast<std::size_t>(tp) <= rest.size();
       i += static_cast<std::size_t>(tp)) {
    const std::vector<int> members(rest.begin() + static_cast<std::ptrdiff_t>(i),
                                   rest.begin() + static_cast<std::ptrdiff_t>(i) + tp);
    COMPASS_ASSIGN(const hardware::Ring ring, hardware::find_ring(p, members));
    groups.push_back(ring.order);
  }
  for (const std::vector<int>& grp : groups)
    for (std::size_t i = 0; i < grp.size(); ++i)
      for (std::size_t j = i + 1; j < grp.size(); ++j)
        if (!p.peer_access(grp[i], grp[j]))
          return make_error(
              "TransformerEngine's userbuffers cannot run on '{}': GPUs {} and {} of a TP group "
              "have no peer-to-peer access (profile p2p: false), and userbuffers map each "
              "other's memory",
              lp.profile, std::min(grp[i], grp[j]), std::max(grp[i], grp[j]));
  return groups;
}

// Launch settings. TE's ring goes from TP rank i to rank i+1, and a local rank drives the
// i-th visible device, so listing each group's GPUs in ring order makes TE's ring Compass's ring.
Status launch_settings(const hardware::Profile& p, const LayerPlan& lp,
                       const TeExportOptions& opt, TeExport& ex) {
  const int tp = lp.parallel.tp;
  COMPASS_ASSIGN(ex.groups, tp_groups(p, lp));
  // Userbuffers work within a TP group; the context-parallel ranks (the next TP groups in
  // Megatron-LM's rank order) may sit on other machines.
  if (opt.cp > 1 && static_cast<std::int64_t>(tp) * opt.cp > p.gpu_count())
    ex.notes.push_back(fmt::format(
        "CP {}: tp {} x cp {} = {} GPUs span more than one '{}' machine; this launch holds the "
        "TP groups of one machine (source it on each)",
        opt.cp, tp, opt.cp, std::int64_t{tp} * opt.cp, lp.profile));
  for (const std::vector<int>& grp : ex.groups)
    ex.device_order.insert(ex.device_order.end(), grp.begin(), grp.end());
  ex.multicast = te_cuda_multicast(p, ex.device_order);
  std::string visible;
  for (int g : ex.device_order) visible += (visible.empty() ? "" : ",") + std::to_string(g);
  ex.env = {{"CUDA_DEVICE_MAX_CONNECTIONS", "1"},
            {"CUDA_DEVICE_ORDER", "PCI_BUS_ID"},
            {"CUDA_VISIBLE_DEVICES", visible}};
  if (!ex.multicast) {
    ex.env.emplace_back("UB_SKIPMC", "1");
    ex.notes.push_back(fmt::format(
        "UB_SKIPMC=1: '{}' has no CUDA multicast (it needs Hopper-class GPUs or newer on an "
        "NVSwitch), so TE's userbuffers use CUDA IPC instead",
        lp.profile));
  }
  std::vector<std::string> args = {"--tensor-model-parallel-size", std::to_string(tp),
                                   "--sequence-parallel",          "--seq-length",
                                   std::to_string(ex.seq),          "--micro-batch-size",
                                   std::to_string(lp.parallel.micro_batch), "--tp-comm-overlap",
                                   "--tp-comm-overlap-cfg",        opt.config_path};
  if (opt.cp > 1) {
    args.push_back("--context-parallel-size");
    args.push_back(std::to_string(opt.cp));
  }
  if (opt.fp8) {
    args.push_back("--fp8-format");
    args.push_back("hybrid");
  }
  if (opt.atomic_gemm) {
    args.push_back("--fp8-recipe");
    args.push_back("delayed");
  }
  if (opt.first_last_layers_bf16) args.push_back("--first-last-layers-bf16");
  args.insert(args.end(), ex.megatron_args.begin(), ex.megatron_args.end());
  ex.megatron_args = std::move(args);
  const int listed = static_cast<int>(ex.device_order.size());
  if (p.gpu_count() > listed)
    ex.notes.push_back(fmt::format(
        "CUDA_VISIBLE_DEVICES lists {} of the {} GPUs of '{}' ({} TP group{} of {})", listed,
        p.gpu_count(), lp.profile, ex.groups.size(), ex.groups.size() == 1 ? "" : "s", tp));
  if (opt.atomic_gemm) {
    ex.requirements.push_back(
        "atomic GEMM: CUDA and cuBLAS 12.2 or newer and older than 13 (compass doctor prints "
        "both versions)");
    ex.requirements.push_back(
        "atomic GEMM: delayed FP8 scaling (--fp8-recipe delayed, in the flags)");
    ex.notes.push_back(
        "atomic GEMM is not modelled: the times above are those of the same methods without it, "
        "and Compass never turns it on by itself (TE calls it a beta cuBLAS path)");
  }
  if (opt.first_last_layers_bf16)
    ex.notes.push_back(
        "--first-last-layers-bf16: qkv_dgrad and fc1_dgrad stay bulk and no entry is atomic, "
        "since TE builds the BF16 layers' communicators from the same configuration");
  return {};
}

}  // namespace

std::string te_release_requirement(const std::vector<TeEntry>& entries) {
  const bool fp8_buf =
      std::any_of(entries.begin(), entries.end(), [](const TeEntry& e) { return e.fp8_buf; });
  const bool atomic =
      std::any_of(entries.begin(), entries.end(), [](const TeEntry& e) { return e.atomic_gemm; });
  std::vector<std::string> keys;
  if (fp8_buf) keys.push_back("fp8_buf");
  if (atomic) keys.push_back("atomic_gemm");
  if (keys.empty()) return "";
  return fmt::format(
      "TransformerEngine 1.6 or newer ({}: {} older releases do not read); compass doctor prints "
      "the installed version",
      fmt::join(keys, ", "), keys.size() == 1 ? "a key" : "keys");
}

namespace {

// The releases the launch needs beyond those every export needs: megatron-core for the flags
// (megatron_flags.hpp) and TransformerEngine for the entries' keys (te_release_requirement).
void add_release_requirements(TeExport& ex) {
  if (std::string mc = megatron_core_requirement(ex.megatron_args); !mc.empty())
    ex.requirements.push_back(std::move(mc));
  if (std::string te = te_release_requirement(ex.entries); !te.empty())
    ex.requirements.push_back(std::move(te));
}

}  // namespace

Result<TeExport> export_te(const hardware::Profile& p, const LayerPlan& lp,
                           const TeExportOptions& opt) {
  COMPASS_ASSIGN(TeExport ex, export_header(lp, opt));
  Choices ch;
  for (const PlannedOp& po : lp.ops) ch.ops[po.choice.op.role] = &po;
  for (const std::string& role : te_layer_names())
    if (!ch.ops.count(role)) return make_error("the plan has no operator for {}", role);
  // With the device order below, TE's rank-order ring is Compass's topology-aware ring, so the
  // exported settings are predicted on the topology-aware plan.
  const schedule::CommPlan& plan = lp.plan;
  COMPASS_TRY(launch_settings(p, lp, opt, ex));
  std::vector<std::string> direction_args;
  std::swap(direction_args, ex.megatron_args);
  // The settings' estimates share one set of caches (the bulk phases and the candidates meet
  // the same operators again and again).
  model::Caches caches;
  COMPASS_TRY(choose_ag(p, plan, ex.tp, ch, ex, caches));
  COMPASS_TRY(choose_rs_fprop(p, plan, ex.tp, ch, ex, caches));
  COMPASS_TRY(choose_dgrad(p, plan, ex.tp, ch, ex, caches));
  direction_args.insert(direction_args.end(), ex.megatron_args.begin(), ex.megatron_args.end());
  ex.megatron_args = std::move(direction_args);
  COMPASS_TRY(config_entries(ch, ex.tp, opt, ex));
  add_release_requirements(ex);
  COMPASS_TRY(report_layers(lp, ch, ex));
  return ex;
}

namespace {

std::string yaml_bool(bool b) { return b ? "true" : "false"; }

// One entry's keys TE reads, with their values as YAML scalars.
std::vector<std::pair<std::string, std::string>> entry_values(const TeEntry& t, bool fp8) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const std::string& k : te_keys_read(t.name, t.method, fp8)) {
    std::string v;
    if (k == "method") v = to_string(t.method);
    else if (k == "num_splits") v = std::to_string(t.num_splits);
    else if (k == "num_sm") v = std::to_string(t.num_sm);
    else if (k == "cga_size") v = std::to_string(t.cga_size);
    else if (k == "set_sm_margin") v = yaml_bool(t.set_sm_margin);
    else if (k == "aggregate") v = yaml_bool(t.aggregate);
    else if (k == "atomic_gemm") v = yaml_bool(t.atomic_gemm);
    else if (k == "use_ce") v = yaml_bool(t.use_ce);
    else if (k == "fp8_buf") v = yaml_bool(t.fp8_buf);
    out.emplace_back(k, v);
  }
  return out;
}

}  // namespace

std::string te_config_yaml(const TeExport& e) {
  std::string out = fmt::format(
      "# TransformerEngine userbuffers overlap settings for Megatron-LM --tp-comm-overlap-cfg.\n"
      "# Written by compass export te: {} on {}, tp {}, seq {}, micro-batch {}.\n"
      "# Each entry carries only the keys TE reads for its method.\n"
      "# Launch with the settings of the accompanying launch script (device order, flags).\n",
      e.model, e.profile, e.tp, e.seq, e.micro_batch);
  for (const TeEntry& t : e.entries) {
    out += fmt::format("{}:\n", t.name);
    for (const auto& [k, v] : entry_values(t, e.runtime.fp8)) out += fmt::format("  {}: {}\n", k, v);
  }
  return out;
}

nlohmann::json te_config_json(const TeExport& e) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  for (const TeEntry& t : e.entries) {
    nlohmann::ordered_json o = nlohmann::ordered_json::object();
    for (const auto& [k, v] : entry_values(t, e.runtime.fp8)) {
      if (v == "true" || v == "false") o[k] = v == "true";
      else if (k == "method") o[k] = v;
      else o[k] = std::stoi(v);
    }
    j[t.name] = std::move(o);
  }
  return nlohmann::json::parse(j.dump());
}

std::string te_launch_script(const TeExport& e) {
  std::string out = fmt::format(
      "# Launch settings for TransformerEngine tp-comm-overlap, written by compass export te\n"
      "# ({} on {}, tp {}). Source this file, then pass \"${{MEGATRON_TP_ARGS[@]}}\" to\n"
      "# Megatron-LM's training script.\n",
      e.model, e.profile, e.tp);
  for (const std::string& r : e.requirements) out += fmt::format("# Requires {}\n", r);
  for (const auto& [k, v] : e.env) out += fmt::format("export {}={}\n", k, shell_quote(v));
  out += "MEGATRON_TP_ARGS=(";
  for (std::size_t i = 0; i < e.megatron_args.size(); ++i)
    out += (i ? " " : "") + shell_quote(e.megatron_args[i]);
  out += ")\n";
  return out;
}

nlohmann::json to_json(const TeExport& e) {
  nlohmann::json layers = nlohmann::json::array();
  for (const TeLayerReport& r : e.layers)
    layers.push_back({{"role", r.role},
                      {"te_entry", r.te_entry},
                      {"compass", schedule::to_string(r.compass)},
                      {"compass_s", r.compass_s},
                      {"exported", r.exported},
                      {"exported_as", schedule::to_string(r.exported_as)},
                      {"exported_s", r.exported_s},
                      {"te_default", r.te_default},
                      {"te_default_s", r.te_default_s},
                      {"exact", r.exact},
                      {"note", r.note}});
  nlohmann::json env = nlohmann::json::object();
  for (const auto& [k, v] : e.env) env[k] = v;
  return {{"profile", e.profile},
          {"model", e.model},
          {"tp", e.tp},
          {"cp", e.cp},
          {"seq", e.seq},
          {"micro_batch", e.micro_batch},
          {"config", te_config_json(e)},
          {"env", env},
          {"multicast", e.multicast},
          {"device_order", e.device_order},
          {"tp_groups", e.groups},
          {"megatron_args", e.megatron_args},
          {"rs_dgrad", e.runtime.rs_dgrad},
          {"layers", layers},
          {"total", {{"compass_s", e.compass_s},
                     {"exported_s", e.exported_s},
                     {"te_default_s", e.te_default_s}}},
          {"requirements", e.requirements},
          {"notes", e.notes}};
}

}  // namespace compass::plan
