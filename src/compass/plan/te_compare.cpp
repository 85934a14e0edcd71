#include "compass/plan/te_compare.hpp"

#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "compass/model/estimate.hpp"
#include "compass/plan/te_model.hpp"

namespace compass::plan {

using schedule::Strategy;
using schedule::StrategyKind;

namespace {

// TE reads a key as true when Python would: a boolean, a non-zero number, a non-empty list.
bool truthy(const nlohmann::json& v) {
  if (v.is_boolean()) return v.get<bool>();
  if (v.is_number()) return v.get<double>() != 0;
  if (v.is_array() || v.is_object() || v.is_string()) return !v.empty();
  return false;
}

Result<int> int_field(const nlohmann::json& j, const char* key, const std::string& where) {
  if (!j.contains(key) || !j.at(key).is_number_integer())
    return make_error("{}: field '{}' is missing or not an integer", where, key);
  return j.at(key).get<int>();
}

std::string describe(const TeEntry& e, bool fp8) {
  std::string s(to_string(e.method));
  if (e.method == TeMethod::pipeline) s += fmt::format(":{}", e.num_splits);
  s += fmt::format(" sm{}", e.num_sm);
  if (e.set_sm_margin) s += " margin";
  if (e.atomic_gemm) s += " atomic";
  if (e.aggregate) s += " aggregate";
  if (fp8 && e.fp8_buf && e.method == TeMethod::pipeline) s += " fp8_buf";
  return s;
}

// The keys set differently, among those TE reads for the methods involved.
std::vector<std::string> differences(const TeEntry& a, const TeEntry& b, bool fp8) {
  std::vector<std::string> out;
  if (a.method != b.method)
    out.push_back(fmt::format("method {} vs {}", to_string(a.method), to_string(b.method)));
  const std::vector<std::string> ka = te_keys_read(a.name, a.method, fp8);
  const std::vector<std::string> kb = te_keys_read(b.name, b.method, fp8);
  auto both = [&](const std::string& k) {
    return std::count(ka.begin(), ka.end(), k) && std::count(kb.begin(), kb.end(), k);
  };
  auto num = [&](const char* k, int x, int y) {
    if (both(k) && x != y) out.push_back(fmt::format("{} {} vs {}", k, x, y));
  };
  auto flag = [&](const char* k, bool x, bool y) {
    if (both(k) && x != y) out.push_back(fmt::format("{} {} vs {}", k, x, y));
  };
  num("num_splits", a.num_splits, b.num_splits);
  num("num_sm", a.num_sm, b.num_sm);
  num("cga_size", a.cga_size, b.cga_size);
  flag("set_sm_margin", a.set_sm_margin, b.set_sm_margin);
  flag("aggregate", a.aggregate, b.aggregate);
  flag("atomic_gemm", a.atomic_gemm, b.atomic_gemm);
  flag("fp8_buf", a.fp8_buf, b.fp8_buf);
  return out;
}

const TeEntry* find_entry(const std::vector<TeEntry>& es, const std::string& name) {
  for (const TeEntry& e : es)
    if (e.name == name) return &e;
  return nullptr;
}

// A reduce-scatter operator under a TE entry's overlapped method; the buffer is BF16 in an FP8
// run unless the entry pipelines with fp8_buf.
Result<double> rs_time_s(const hardware::Profile& p, const workload::OperatorSpec& op,
                         const schedule::CommPlan& plan, const TeEntry& e, model::Caches& caches) {
  const Strategy s = e.method == TeMethod::pipeline ? Strategy{StrategyKind::decompose, e.num_splits}
                                                    : Strategy{StrategyKind::fuse_all2all, 0};
  COMPASS_ASSIGN(const double t,
                 model::estimate_time_s(p, op, s, plan, model::ModelKnobs{}, caches));
  double extra = 0;
  if (!(e.method == TeMethod::pipeline && e.fp8_buf)) {
    COMPASS_ASSIGN(extra, te_bf16_buffer_extra_s(p, op, plan, caches));
  }
  return t + extra;
}

}  // namespace

Result<TePreset> parse_te_preset(const nlohmann::json& j, const std::string& fallback_name) {
  if (!j.is_object()) return make_error("{}: a preset is a JSON object", fallback_name);
  TePreset out;
  out.name = j.contains("name") && j.at("name").is_string() ? j.at("name").get<std::string>()
                                                             : fallback_name;
  const std::string& where = out.name;
  if (j.contains("source") && j.at("source").is_object()) {
    const nlohmann::json& s = j.at("source");
    out.source = fmt::format("{} {}@{} line {}", s.value("repo", "?"), s.value("path", "?"),
                             s.value("commit", "?"), s.value("line", 0));
  }
  out.gpu = j.value("gpu", "");
  out.dtype = j.value("dtype", "");
  COMPASS_ASSIGN(out.tp, int_field(j, "tp", where));
  if (out.tp < 2) return make_error("{}: tp {} has no TP communication", where, out.tp);
  out.cp = j.value("cp", 1);
  out.micro_batch = j.value("micro_batch", 1);
  out.hidden = j.value("hidden", std::int64_t{0});
  out.seq = j.value("seq", std::int64_t{0});
  if (!j.contains("layers") || !j.at("layers").is_object())
    return make_error("{}: field 'layers' is missing or not an object", where);
  const nlohmann::json& layers = j.at("layers");
  for (const auto& [name, cfg] : layers.items()) {
    if (!te_default_entry(name, out.tp)) return make_error("{}: unknown layer '{}'", where, name);
    if (!cfg.is_object()) return make_error("{}: layers.{} is not an object", where, name);
  }
  std::vector<std::string> dropped;
  for (const std::string& name : te_layer_names()) {
    // TE fills what a preset leaves out from the layer's default method's settings.
    TeEntry e = *te_default_entry(name, out.tp);
    if (layers.contains(name)) {
      const nlohmann::json& c = layers.at(name);
      if (c.contains("method")) {
        if (!c.at("method").is_string()) return make_error("{}: {}.method is not a string", where, name);
        const auto m = parse_te_method(c.at("method").get<std::string>());
        if (!m) return make_error("{}: {}.method '{}' is not ring_exchange, pipeline or bulk", where,
                                  name, c.at("method").get<std::string>());
        e.method = *m;
      }
      auto get_int = [&](const char* k, int& v) -> Status {
        if (!c.contains(k)) return {};
        if (!c.at(k).is_number_integer())
          return make_error("{}: {}.{} is not an integer", where, name, k);
        v = c.at(k).get<int>();
        return {};
      };
      COMPASS_TRY(get_int("num_sm", e.num_sm));
      COMPASS_TRY(get_int("cga_size", e.cga_size));
      COMPASS_TRY(get_int("num_splits", e.num_splits));
      if (c.contains("set_sm_margin")) e.set_sm_margin = truthy(c.at("set_sm_margin"));
      if (c.contains("aggregate")) e.aggregate = truthy(c.at("aggregate"));
      if (c.contains("atomic_gemm")) e.atomic_gemm = truthy(c.at("atomic_gemm"));
      if (c.contains("use_ce")) e.use_ce = truthy(c.at("use_ce"));
      if (c.contains("fp8_buf")) e.fp8_buf = truthy(c.at("fp8_buf"));
    }
    if (e.method == TeMethod::ring_exchange) e.num_splits = out.tp;  // TE ignores it there
    if (e.method != TeMethod::pipeline) e.fp8_buf = false;          // read only by pipelines
    out.entries.push_back(e);
  }
  // A non-bulk data-gradient entry takes the reduce-scatter from its wgrad entry.
  for (const char* d : {"qkv_dgrad", "fc1_dgrad"}) {
    const TeEntry* e = find_entry(out.entries, d);
    if (e != nullptr && e->method != TeMethod::bulk) {
      const std::string w = std::string(d).substr(0, 4) + "wgrad";
      std::erase_if(out.entries, [&](const TeEntry& x) { return x.name == w; });
    }
  }
  return out;
}

Result<TeComparison> compare_te(const hardware::Profile& p, const LayerPlan& lp,
                                const TeExport& ex, const TePreset& preset) {
  const int tp = lp.parallel.tp;
  if (preset.tp != tp)
    return make_error("preset {} is for tp {}, the plan has tp {} (pass --tp {})", preset.name,
                      preset.tp, tp, preset.tp);
  const bool fp8 = ex.runtime.fp8;
  for (const TeEntry& e : preset.entries)
    if (e.method == TeMethod::pipeline && (e.num_splits < 1 || ex.runtime.rows_per_rank % e.num_splits))
      return make_error("preset {}: {} pipelines in {} splits, which do not divide the {} rows "
                        "each rank owns here",
                        preset.name, e.name, e.num_splits, ex.runtime.rows_per_rank);
  TeComparison out;
  out.preset = preset;
  std::map<std::string, const PlannedOp*> ops;
  for (const PlannedOp& po : lp.ops) ops[po.choice.op.role] = &po;
  const schedule::CommPlan& plan = lp.plan;
  model::Caches caches;  // shared by every estimate below

  // The preset's setting and time per Compass operator.
  std::map<std::string, std::pair<std::string, double>> priced;
  for (const char* r : {"qkv_fprop", "fc1_fprop", "proj_dgrad", "fc2_dgrad"}) {
    const TeEntry& e = *find_entry(preset.entries, r);
    const Strategy s{StrategyKind::fuse_ring, 0};
    COMPASS_ASSIGN(const double t, model::estimate_time_s(p, ops.at(r)->choice.op, s, plan,
                                                          model::ModelKnobs{}, caches));
    priced[r] = {describe(e, fp8), t};
  }
  for (const char* r : {"proj_fprop", "fc2_fprop"}) {
    const TeEntry& e = *find_entry(preset.entries, r);
    COMPASS_ASSIGN(const double t, rs_time_s(p, ops.at(r)->choice.op, plan, e, caches));
    priced[r] = {describe(e, fp8), t};
  }
  for (const char* d : {"qkv_dgrad", "fc1_dgrad"}) {
    const std::string w = std::string(d).substr(0, 4) + "wgrad";
    const PlannedOp& od = *ops.at(d);
    const PlannedOp& ow = *ops.at(w);
    const TeEntry& ed = *find_entry(preset.entries, d);
    if (ed.method == TeMethod::bulk) {
      // TE's *_dgrad communicator gathers the input beside the data-gradient GEMM, its *_wgrad
      // one reduce-scatters the data gradient (BF16) beside the weight-gradient GEMM.
      const TeEntry* ew = find_entry(preset.entries, w);
      const TeEntry wdef = *te_default_entry(w, tp);
      const TeEntry& wcfg = ew != nullptr ? *ew : wdef;
      COMPASS_ASSIGN(const TeBulkPhase ag,
                     te_bulk_phase(p, od.choice.op, ow.choice.op, plan, ed.num_sm, ed.set_sm_margin,
                                   false, caches));
      COMPASS_ASSIGN(const TeBulkPhase rs,
                     te_bulk_phase(p, ow.choice.op, od.choice.op, plan, wcfg.num_sm,
                                   wcfg.set_sm_margin, true, caches));
      priced[w] = {fmt::format("{} ({})", describe(ed, fp8), d), ag.total_s};
      priced[d] = {fmt::format("{} ({})", describe(wcfg, fp8), w), rs.total_s};
    } else {
      COMPASS_ASSIGN(const double t, rs_time_s(p, od.choice.op, plan, ed, caches));
      double extra = 0;
      if (!(ed.method == TeMethod::pipeline && ed.fp8_buf)) {
        COMPASS_ASSIGN(extra, te_bf16_buffer_extra_s(p, od.choice.op, plan, caches));
      }
      priced[d] = {describe(ed, fp8), t};
      priced[w] = {"nccl", te_rs_dgrad_wgrad_s(p, ow.megatron, t, od.megatron.comm_s + extra)};
    }
  }
  if (std::count_if(preset.entries.begin(), preset.entries.end(),
                    [](const TeEntry& e) { return e.name.ends_with("_dgrad") && e.name != "proj_dgrad" &&
                                                  e.name != "fc2_dgrad" && e.method != TeMethod::bulk; }) == 1)
    out.notes.push_back("the preset overlaps one data-gradient reduce-scatter with its GEMM and "
                        "keeps the other bulk; Megatron-LM's --tp-comm-overlap-rs-dgrad switches "
                        "both, so each layer is priced as its entry says");
  for (const TeLayerReport& r : ex.layers) {
    const auto& [label, t] = priced.at(r.role);
    out.roles.push_back({r.role, r.exported, r.exported_s, label, t});
    out.compass_s += r.exported_s;
    out.preset_s += t;
  }
  for (const std::string& n : te_layer_names()) {
    const TeEntry* a = find_entry(ex.entries, n);
    const TeEntry* b = find_entry(preset.entries, n);
    TeEntryDiff d;
    d.name = n;
    d.compass = a != nullptr ? describe(*a, fp8) : "-";
    d.preset = b != nullptr ? describe(*b, fp8) : "-";
    if (a != nullptr && b != nullptr) d.differences = differences(*a, *b, fp8);
    else if ((a == nullptr) != (b == nullptr))
      d.differences.push_back(a == nullptr ? "absent from the export" : "absent from the preset");
    out.entries.push_back(std::move(d));
  }
  if (!preset.dtype.empty() && preset.dtype != (fp8 ? "fp8" : "bf16"))
    out.notes.push_back(fmt::format("the preset was tuned for {} GEMMs; this plan runs {}",
                                    preset.dtype, fp8 ? "fp8 (--fp8)" : "bf16"));
  out.notes.push_back("both configurations are priced on the same plan by the export's model; "
                      "atomic GEMM, where set, is not modelled");
  return out;
}

nlohmann::json to_json(const TeComparison& c) {
  nlohmann::json entries = nlohmann::json::array();
  for (const TeEntryDiff& d : c.entries)
    entries.push_back({{"name", d.name},
                       {"compass", d.compass},
                       {"preset", d.preset},
                       {"differences", d.differences}});
  nlohmann::json roles = nlohmann::json::array();
  for (const TeRoleDiff& r : c.roles)
    roles.push_back({{"role", r.role},
                     {"compass", r.compass},
                     {"compass_s", r.compass_s},
                     {"preset", r.preset},
                     {"preset_s", r.preset_s},
                     {"preset_minus_compass_s", r.preset_s - r.compass_s}});
  return {{"preset", {{"name", c.preset.name},
                      {"source", c.preset.source},
                      {"gpu", c.preset.gpu},
                      {"dtype", c.preset.dtype},
                      {"tp", c.preset.tp},
                      {"cp", c.preset.cp},
                      {"micro_batch", c.preset.micro_batch},
                      {"hidden", c.preset.hidden},
                      {"seq", c.preset.seq}}},
          {"entries", entries},
          {"roles", roles},
          {"total", {{"compass_s", c.compass_s},
                     {"preset_s", c.preset_s},
                     {"preset_minus_compass_s", c.preset_s - c.compass_s}}},
          {"notes", c.notes}};
}

}  // namespace compass::plan
