#include "compass/plan/te_export.hpp"

#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>

#include "compass/model/estimate.hpp"
#include "compass/model/selector.hpp"

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
// All-gather layer -> reduce-scatter layer of the same TP block (atomic GEMM pairs).
const std::map<std::string, std::string>& block_pairs() {
  static const std::map<std::string, std::string> m = {{"qkv_fprop", "proj_fprop"},
                                                       {"fc1_fprop", "fc2_fprop"}};
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
  e.num_sm = ring ? 1 : 16;
  e.cga_size = ring ? 1 : 2;
  e.set_sm_margin = !ring;
  e.num_splits = ring ? tp : 4;
  return e;
}

}  // namespace

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
    }
  }
  // A TP block's all-gather and reduce-scatter layers must agree on atomic ring exchange:
  // the all-gather side shuffles chunk outputs that only the reduce-scatter side restores.
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
  std::string label;  // "ring_exchange", "pipeline:4", "bulk", "off"
  TeMethod method = TeMethod::ring_exchange;
  int splits = 0;
  Strategy as;
  double time_s = 0;
  bool faithful = true;  // TE runs the strategy it is predicted as (not only a look-alike)
};

std::string strategy_label_for_te_default(const Strategy& s) {
  switch (s.kind) {
    case StrategyKind::fuse_ring: return "ring_exchange";
    case StrategyKind::decompose: return fmt::format("pipeline:{}", s.parts);
    default: return "bulk";
  }
}

Result<Candidate> make_candidate(const hardware::Profile& p, const workload::OperatorSpec& op,
                                 const schedule::CommPlan& plan, std::string label,
                                 TeMethod method, int splits, Strategy as) {
  COMPASS_ASSIGN(const double t, model::estimate_time_s(p, op, as, plan, model::ModelKnobs{}));
  return Candidate{std::move(label), method, splits, as, t, true};
}

// Overlapping settings TE can run for a GEMM -> reduce-scatter operator, fastest first.
Result<std::vector<Candidate>> rs_candidates(const hardware::Profile& p, const PlannedOp& po,
                                             const schedule::CommPlan& plan, int tp) {
  const workload::OperatorSpec& op = po.choice.op;
  const std::int64_t rows = workload::rows_per_rank(op);
  std::set<int> degrees;
  const Strategy& chosen = po.compass().strategy;
  if (chosen.kind == StrategyKind::decompose) degrees.insert(chosen.parts);
  for (int d : {po.choice.odp.d_closed, po.choice.odp.d_argmin, 4})
    if (d >= 2) degrees.insert(d);
  std::vector<Candidate> out;
  for (int d : degrees) {
    if (rows % d != 0) continue;
    COMPASS_ASSIGN(Candidate c, make_candidate(p, op, plan, fmt::format("pipeline:{}", d),
                                               TeMethod::pipeline, d,
                                               Strategy{StrategyKind::decompose, d}));
    out.push_back(std::move(c));
  }
  // TE's reduce-scatter ring exchange sends each GEMM chunk straight to the rank that owns it
  // (step i: to the rank i places ahead) and sums at the end: Compass's fuse:all2all pattern.
  COMPASS_ASSIGN(Candidate ring, make_candidate(p, op, plan, "ring_exchange",
                                                TeMethod::ring_exchange, tp,
                                                Strategy{StrategyKind::fuse_all2all, 0}));
  ring.faithful = false;  // TE sends to one peer per step, fuse:all2all to all at once
  out.push_back(std::move(ring));
  std::stable_sort(out.begin(), out.end(),
                   [](const Candidate& a, const Candidate& b) { return a.time_s < b.time_s; });
  return out;
}

// The RS candidate for Compass's exact choice when TE can run it, else the fastest.
Candidate pick_rs(const PlannedOp& po, const std::vector<Candidate>& cands) {
  const Strategy& chosen = po.compass().strategy;
  for (const Candidate& c : cands)
    if (c.as == chosen) return c;
  return cands.front();
}

Candidate sequential_candidate(const PlannedOp& po, std::string label, TeMethod method) {
  const bool faithful = label == "off";  // bulk and NCCL overlap with another GEMM
  return Candidate{std::move(label), method, 0, Strategy{StrategyKind::sequential, 0},
                   po.megatron.total_s, faithful};
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
  TeExport ex;
  ex.profile = lp.profile;
  ex.model = lp.model.name;
  ex.tp = tp;
  ex.seq = lp.parallel.seq;
  ex.micro_batch = lp.parallel.micro_batch;
  ex.runtime.tp = tp;
  ex.runtime.rows_per_rank = lp.parallel.seq * lp.parallel.micro_batch / tp;
  ex.runtime.fp8 = opt.fp8;
  return ex;
}

// All-gather operators: ring exchange, or every one of them off.
Status choose_ag(const hardware::Profile& p, const schedule::CommPlan& plan, int tp,
                 Choices& ch, TeExport& ex) {
  double seq_sum = 0, ring_sum = 0;
  CandidateMap ring;
  for (const std::string& r : ag_layers()) {
    const PlannedOp& po = *ch.ops[r];
    COMPASS_ASSIGN(Candidate c, make_candidate(p, po.choice.op, plan, "ring_exchange",
                                               TeMethod::ring_exchange, tp,
                                               Strategy{StrategyKind::fuse_ring, 0}));
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

// The RS setting of each of `roles` (pick_rs), and the sums of their sequential and picked times.
Result<CandidateMap> pick_rs_all(const hardware::Profile& p,
                                                     const schedule::CommPlan& plan, int tp,
                                                     const std::set<std::string>& roles,
                                                     const Choices& ch, double* seq_sum,
                                                     double* picked_sum) {
  CandidateMap out;
  for (const std::string& r : roles) {
    const PlannedOp& po = *ch.ops.at(r);
    COMPASS_ASSIGN(const std::vector<Candidate> cands, rs_candidates(p, po, plan, tp));
    Candidate c = pick_rs(po, cands);
    *seq_sum += po.megatron.total_s;
    *picked_sum += c.time_s;
    out.emplace(r, std::move(c));
  }
  return out;
}

// Forward GEMM -> reduce-scatter operators: pipeline or ring exchange, or both off.
Status choose_rs_fprop(const hardware::Profile& p, const schedule::CommPlan& plan, int tp,
                       Choices& ch, TeExport& ex) {
  double seq_sum = 0, best_sum = 0;
  COMPASS_ASSIGN(CandidateMap best,
                 pick_rs_all(p, plan, tp, rs_fprop_layers(), ch, &seq_sum, &best_sum));
  const bool off = seq_sum <= best_sum;
  for (const std::string& r : rs_fprop_layers()) {
    ch.chosen[r] = off ? sequential_candidate(*ch.ops[r], "off", TeMethod::pipeline) : best[r];
    ch.carrier[r] = r;
  }
  if (off) ex.megatron_args.push_back("--disable-tp-comm-overlap-rs");
  return {};
}

// Column-parallel backward: bulk (TE's default) or, when it predicts faster, the data
// gradient's reduce-scatter overlapped with its GEMM (--tp-comm-overlap-rs-dgrad).
Status choose_dgrad(const hardware::Profile& p, const schedule::CommPlan& plan, int tp,
                    Choices& ch, TeExport& ex) {
  double bulk_sum = 0, rs_sum = 0;
  COMPASS_ASSIGN(CandidateMap rs,
                 pick_rs_all(p, plan, tp, dgrad_layers(), ch, &bulk_sum, &rs_sum));
  ex.runtime.rs_dgrad = rs_sum < bulk_sum * (1.0 - model::kTieTolerance);
  for (const std::string& r : dgrad_layers()) {
    // Compass's *_dgrad is the reduce-scatter of the data gradient, *_wgrad the all-gather
    // of the layer input. Bulk mode carries the first in TE's *_wgrad communicator and the
    // second in its *_dgrad one; rs-dgrad mode carries the first in *_dgrad and leaves the
    // all-gather to NCCL beside the dgrad GEMM.
    const std::string w = wgrad_of(r);
    if (ex.runtime.rs_dgrad) {
      ch.chosen[r] = rs[r];
      ch.carrier[r] = r;
      ch.chosen[w] = sequential_candidate(*ch.ops[w], "nccl", TeMethod::bulk);
      ch.carrier[w] = "-";
    } else {
      ch.chosen[r] = sequential_candidate(*ch.ops[r], "bulk", TeMethod::bulk);
      ch.carrier[r] = w;
      ch.chosen[w] = sequential_candidate(*ch.ops[w], "bulk", TeMethod::bulk);
      ch.carrier[w] = r;
    }
  }
  if (ex.runtime.rs_dgrad) ex.megatron_args.push_back("--tp-comm-overlap-rs-dgrad");
  return {};
}

// Atomic GEMM on every overlapped entry, except where its block pair's methods rule it out
// (said in a note).
void set_atomic_gemm(std::map<std::string, TeEntry>& entries, TeExport& ex) {
  for (auto& [n, e] : entries)
    if (e.method != TeMethod::bulk) e.atomic_gemm = true;
  for (const auto& [ag, rs] : block_pairs()) {
    TeEntry& a = entries.at(ag);
    TeEntry& b = entries.at(rs);
    const bool ring_a = a.method == TeMethod::ring_exchange;
    const bool ring_b = b.method == TeMethod::ring_exchange;
    if (ring_a != ring_b) {
      (ring_a ? a : b).atomic_gemm = false;
      ex.notes.push_back(fmt::format(
          "{} keeps atomic_gemm off: atomic ring exchange needs its pair {} on ring_exchange "
          "too, and it runs {}",
          ring_a ? ag : rs, ring_a ? rs : ag, to_string((ring_a ? b : a).method)));
    }
  }
}

// The configuration: every TE layer at its default, then the exported methods.
Status config_entries(const Choices& ch, int tp, const TeExportOptions& opt, TeExport& ex) {
  std::map<std::string, TeEntry> entries;
  for (const std::string& n : te_layer_names()) entries.emplace(n, *te_default_entry(n, tp));
  for (const auto& [role, c] : ch.chosen) {
    const std::string& n = ch.carrier.at(role);
    if (n == "-" || c.label == "off" || c.label == "bulk") continue;
    TeEntry e = entry_for_method(n, c.method, tp);
    if (c.method == TeMethod::pipeline) e.num_splits = c.splits;
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
  if (c.label == "bulk" || c.label == "nccl")
    return "TE overlaps this collective with another GEMM of the layer; predicted as "
           "sequential (no credit for that overlap)";
  if (c.label == "off") return "the whole direction is off: overlapping it predicts slower in sum";
  if (!c.faithful)
    return "TE's reduce-scatter ring exchange sends to one peer per step; predicted as "
           "fuse:all2all";
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
void report_layers(const LayerPlan& lp, const Choices& ch, TeExport& ex) {
  for (const PlannedOp& po : lp.ops) {
    const std::string& role = po.choice.op.role;
    const Candidate& c = ch.chosen.at(role);
    TeLayerReport r;
    r.role = role;
    r.te_entry = ch.carrier.at(role);
    r.compass = po.compass().strategy;
    r.compass_s = po.compass().total_s;
    r.exported = c.label;
    r.exported_as = c.as;
    r.exported_s = c.time_s;
    r.te_default = strategy_label_for_te_default(te_default_strategy(po.choice.op));
    r.te_default_s = po.te.total_s;
    r.exact = c.as == r.compass && c.faithful;
    r.note = layer_note(po, c, r);
    ex.compass_s += r.compass_s;
    ex.exported_s += r.exported_s;
    ex.te_default_s += r.te_default_s;
    ex.layers.push_back(std::move(r));
  }
}

// Launch settings. TE's ring goes from TP rank i to rank i+1, and a local rank drives the
// i-th visible device, so listing the GPUs in ring order makes TE's ring Compass's ring.
void launch_settings(const hardware::Profile& p, const LayerPlan& lp, const TeExportOptions& opt,
                     TeExport& ex) {
  const int tp = lp.parallel.tp;
  for (int r : lp.plan.ring) ex.device_order.push_back(lp.plan.gpus[r]);
  std::string visible;
  for (int g : ex.device_order) visible += (visible.empty() ? "" : ",") + std::to_string(g);
  ex.env = {{"CUDA_DEVICE_MAX_CONNECTIONS", "1"},
            {"CUDA_DEVICE_ORDER", "PCI_BUS_ID"},
            {"CUDA_VISIBLE_DEVICES", visible}};
  std::vector<std::string> args = {"--tensor-model-parallel-size", std::to_string(tp),
                                   "--sequence-parallel",          "--seq-length",
                                   std::to_string(lp.parallel.seq), "--micro-batch-size",
                                   std::to_string(lp.parallel.micro_batch), "--tp-comm-overlap",
                                   "--tp-comm-overlap-cfg",        opt.config_path};
  if (opt.fp8) {
    args.push_back("--fp8-format");
    args.push_back("hybrid");
  }
  args.insert(args.end(), ex.megatron_args.begin(), ex.megatron_args.end());
  ex.megatron_args = std::move(args);
  if (p.gpu_count() > tp)
    ex.notes.push_back(fmt::format(
        "CUDA_VISIBLE_DEVICES lists the {} GPUs of one TP group; '{}' has {} GPUs", tp,
        lp.profile, p.gpu_count()));
  if (opt.atomic_gemm)
    ex.notes.push_back("atomic GEMM is a beta cuBLAS path in TE, not tested for every case");
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
  COMPASS_TRY(choose_ag(p, plan, ex.tp, ch, ex));
  COMPASS_TRY(choose_rs_fprop(p, plan, ex.tp, ch, ex));
  COMPASS_TRY(choose_dgrad(p, plan, ex.tp, ch, ex));
  COMPASS_TRY(config_entries(ch, ex.tp, opt, ex));
  report_layers(lp, ch, ex);
  launch_settings(p, lp, opt, ex);
  return ex;
}

namespace {

std::string yaml_bool(bool b) { return b ? "true" : "false"; }

}  // namespace

std::string te_config_yaml(const TeExport& e) {
  std::string out = fmt::format(
      "# TransformerEngine userbuffers overlap settings for Megatron-LM --tp-comm-overlap-cfg.\n"
      "# Written by compass export te: {} on {}, tp {}, seq {}, micro-batch {}.\n"
      "# Launch with the settings of the accompanying launch script (device order, flags).\n",
      e.model, e.profile, e.tp, e.seq, e.micro_batch);
  for (const TeEntry& t : e.entries) {
    out += fmt::format("{}:\n", t.name);
    out += fmt::format("  method: {}\n", to_string(t.method));
    out += fmt::format("  num_splits: {}\n", t.num_splits);
    out += fmt::format("  num_sm: {}\n", t.num_sm);
    out += fmt::format("  cga_size: {}\n", t.cga_size);
    out += fmt::format("  set_sm_margin: {}\n", yaml_bool(t.set_sm_margin));
    out += fmt::format("  aggregate: {}\n", yaml_bool(t.aggregate));
    out += fmt::format("  atomic_gemm: {}\n", yaml_bool(t.atomic_gemm));
    out += fmt::format("  use_ce: {}\n", yaml_bool(t.use_ce));
  }
  return out;
}

nlohmann::json te_config_json(const TeExport& e) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  for (const TeEntry& t : e.entries)
    j[t.name] = {{"method", to_string(t.method)}, {"num_splits", t.num_splits},
                 {"num_sm", t.num_sm},            {"cga_size", t.cga_size},
                 {"set_sm_margin", t.set_sm_margin}, {"aggregate", t.aggregate},
                 {"atomic_gemm", t.atomic_gemm},  {"use_ce", t.use_ce}};
  return nlohmann::json::parse(j.dump());
}

std::string te_launch_script(const TeExport& e) {
  std::string out = fmt::format(
      "# Launch settings for TransformerEngine tp-comm-overlap, written by compass export te\n"
      "# ({} on {}, tp {}). Source this file, then pass \"${{MEGATRON_TP_ARGS[@]}}\" to\n"
      "# Megatron-LM's training script.\n",
      e.model, e.profile, e.tp);
  for (const auto& [k, v] : e.env) out += fmt::format("export {}={}\n", k, v);
  out += "MEGATRON_TP_ARGS=(";
  for (std::size_t i = 0; i < e.megatron_args.size(); ++i)
    out += (i ? " " : "") + e.megatron_args[i];
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
          {"seq", e.seq},
          {"micro_batch", e.micro_batch},
          {"config", te_config_json(e)},
          {"env", env},
          {"device_order", e.device_order},
          {"megatron_args", e.megatron_args},
          {"rs_dgrad", e.runtime.rs_dgrad},
          {"layers", layers},
          {"total", {{"compass_s", e.compass_s},
                     {"exported_s", e.exported_s},
                     {"te_default_s", e.te_default_s}}},
          {"notes", e.notes}};
}

}  // namespace compass::plan
