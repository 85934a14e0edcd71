// The TransformerEngine export: the rules every configuration must satisfy, exports for every
// preset and built-in model, and what the per-layer report claims.

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "compass/hardware/presets.hpp"
#include "compass/plan/te_export.hpp"

namespace compass::plan {
namespace {

using schedule::StrategyKind;

TeRuntime runtime(int tp = 8, std::int64_t rows = 512, bool fp8 = false, bool rs_dgrad = false) {
  TeRuntime rt;
  rt.tp = tp;
  rt.rows_per_rank = rows;
  rt.fp8 = fp8;
  rt.rs_dgrad = rs_dgrad;
  return rt;
}

std::vector<TeEntry> defaults(int tp = 8) {
  std::vector<TeEntry> out;
  for (const std::string& n : te_layer_names()) out.push_back(*te_default_entry(n, tp));
  return out;
}

TeEntry& entry(std::vector<TeEntry>& es, const std::string& name) {
  auto it = std::find_if(es.begin(), es.end(), [&](const TeEntry& e) { return e.name == name; });
  EXPECT_NE(it, es.end()) << name;
  return *it;
}

// The error of a configuration that must fail, or "" when it passes.
std::string error_of(const std::vector<TeEntry>& es, const TeRuntime& rt) {
  const Status s = validate_te_config(es, rt);
  return s.ok() ? "" : s.error().message;
}

TEST(TeRules, DefaultsPass) {
  std::vector<TeEntry> es = defaults();
  EXPECT_EQ(es.size(), 10u);
  EXPECT_EQ(error_of(es, runtime()), "");
  EXPECT_EQ(entry(es, "qkv_fprop").num_splits, 8);
  EXPECT_EQ(entry(es, "proj_fprop").method, TeMethod::pipeline);
  EXPECT_EQ(entry(es, "qkv_dgrad").method, TeMethod::bulk);
}

TEST(TeRules, PipelineRejectedOnAllGather) {
  for (const char* n : {"qkv_fprop", "fc1_fprop", "proj_dgrad", "fc2_dgrad"}) {
    std::vector<TeEntry> es = defaults();
    entry(es, n).method = TeMethod::pipeline;
    entry(es, n).num_splits = 4;
    EXPECT_NE(error_of(es, runtime()).find("not supported on an all-gather layer"),
              std::string::npos)
        << n;
  }
}

TEST(TeRules, BulkOnlyWhereTeRunsIt) {
  std::vector<TeEntry> es = defaults();
  entry(es, "proj_fprop").method = TeMethod::bulk;
  EXPECT_NE(error_of(es, runtime()).find("bulk is not supported"), std::string::npos);
  es = defaults();
  entry(es, "qkv_wgrad").method = TeMethod::pipeline;
  EXPECT_NE(error_of(es, runtime()).find("only bulk"), std::string::npos);
}

TEST(TeRules, WgradNeedsBulkDgrad) {
  std::vector<TeEntry> es = defaults();
  entry(es, "qkv_dgrad").method = TeMethod::pipeline;
  entry(es, "fc1_dgrad").method = TeMethod::pipeline;
  EXPECT_NE(error_of(es, runtime(8, 512, false, true)).find("may not be configured"),
            std::string::npos);
  // Without the wgrad entries it passes, but only with Megatron-LM's rs-dgrad switch.
  std::erase_if(es, [](const TeEntry& e) { return e.name.ends_with("_wgrad"); });
  EXPECT_EQ(error_of(es, runtime(8, 512, false, true)), "");
  EXPECT_NE(error_of(es, runtime(8, 512, false, false)).find("--tp-comm-overlap-rs-dgrad"),
            std::string::npos);
  // The switch covers both layers: one bulk dgrad with it on fails.
  entry(es, "fc1_dgrad").method = TeMethod::bulk;
  EXPECT_NE(error_of(es, runtime(8, 512, false, true)).find("needs a non-bulk method"),
            std::string::npos);
}

TEST(TeRules, AtomicGemmNeedsFp8AndPairs) {
  std::vector<TeEntry> es = defaults();
  entry(es, "proj_fprop").atomic_gemm = true;
  EXPECT_NE(error_of(es, runtime()).find("needs FP8"), std::string::npos);
  EXPECT_EQ(error_of(es, runtime(8, 512, true)), "");  // atomic pipeline needs no pair
  es = defaults();
  entry(es, "qkv_wgrad").atomic_gemm = true;
  EXPECT_NE(error_of(es, runtime(8, 512, true)).find("not supported with method bulk"),
            std::string::npos);
  es = defaults();
  entry(es, "qkv_fprop").atomic_gemm = true;  // ring exchange; its pair proj_fprop is pipeline
  EXPECT_NE(error_of(es, runtime(8, 512, true)).find("its pair proj_fprop must too"),
            std::string::npos);
  TeEntry ring = *te_default_entry("qkv_fprop", 8);  // ring exchange settings
  ring.name = "proj_fprop";
  ring.atomic_gemm = true;
  entry(es, "proj_fprop") = ring;
  EXPECT_EQ(error_of(es, runtime(8, 512, true)), "");
}

TEST(TeRules, SplitsAndSms) {
  std::vector<TeEntry> es = defaults();
  entry(es, "fc2_fprop").num_splits = 3;
  EXPECT_NE(error_of(es, runtime()).find("does not divide the 512 rows"), std::string::npos);
  es = defaults();
  entry(es, "qkv_fprop").num_splits = 4;
  EXPECT_NE(error_of(es, runtime()).find("always takes tp=8 steps"), std::string::npos);
  es = defaults();
  entry(es, "fc2_fprop").cga_size = 3;
  EXPECT_NE(error_of(es, runtime()).find("cga_size=3"), std::string::npos);
  es = defaults();
  entry(es, "fc2_fprop").num_sm = 15;
  EXPECT_NE(error_of(es, runtime()).find("not a multiple of cga_size"), std::string::npos);
  es = defaults();
  entry(es, "fc2_fprop").aggregate = true;
  EXPECT_NE(error_of(es, runtime()).find("aggregate applies only"), std::string::npos);
  es = defaults(6);
  entry(es, "qkv_fprop").aggregate = true;
  EXPECT_EQ(error_of(es, runtime(6, 512)), "");
  EXPECT_EQ(error_of(defaults(7), runtime(7, 512)), "");  // odd tp is fine without aggregate
  es = defaults(7);
  entry(es, "qkv_fprop").aggregate = true;
  EXPECT_NE(error_of(es, runtime(7, 512)).find("even tp"), std::string::npos);
}

TEST(TeRules, NamesAndTp) {
  std::vector<TeEntry> es = defaults();
  es.push_back(es.front());
  EXPECT_NE(error_of(es, runtime()).find("configured twice"), std::string::npos);
  es = defaults();
  es.front().name = "qkv_fwd";
  EXPECT_NE(error_of(es, runtime()).find("unknown layer"), std::string::npos);
  EXPECT_NE(error_of(defaults(1), runtime(1)).find("no TP communication"), std::string::npos);
}

Result<TeExport> export_for(const std::string& preset, const std::string& model, int tp,
                            std::int64_t seq = 4096, const TeExportOptions& opt = {},
                            bool sp = true) {
  const hardware::Profile p = *hardware::make_preset(preset);
  workload::ParallelConfig pc;
  pc.tp = tp;
  pc.seq = seq;
  pc.sequence_parallel = sp;
  pc.dtype = opt.fp8 ? DType::fp8 : DType::bf16;
  COMPASS_ASSIGN(const LayerPlan lp, plan_layer(p, *workload::resolve_model(model), pc));
  return export_te(p, lp, opt);
}

TEST(TeExport, DefaultPlan) {
  const Result<TeExport> e = export_for("a6000x8", "llama2-13b", 8);
  ASSERT_TRUE(e.ok()) << e.error().message;
  EXPECT_EQ(error_of(e->entries, e->runtime), "");
  EXPECT_EQ(e->layers.size(), 10u);
  // The device order is the plan's ring, a permutation of the group.
  std::vector<int> sorted = e->device_order;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
  bool has_connections = false;
  for (const auto& [k, v] : e->env) has_connections |= k == "CUDA_DEVICE_MAX_CONNECTIONS" && v == "1";
  EXPECT_TRUE(has_connections);
  const auto& args = e->megatron_args;
  EXPECT_NE(std::find(args.begin(), args.end(), "--tp-comm-overlap"), args.end());
  EXPECT_NE(std::find(args.begin(), args.end(), "--sequence-parallel"), args.end());
  for (const TeLayerReport& r : e->layers) {
    // An exact export is predicted exactly as Compass's choice.
    if (r.exact) {
      EXPECT_DOUBLE_EQ(r.exported_s, r.compass_s) << r.role;
    }
    EXPECT_GT(r.exported_s, 0) << r.role;
    EXPECT_GT(r.te_default_s, 0) << r.role;
    if (!r.exact) {
      EXPECT_FALSE(r.note.empty()) << r.role;
    }
  }
  // The YAML names every entry once, with every key.
  const std::string yaml = te_config_yaml(*e);
  for (const TeEntry& t : e->entries) EXPECT_NE(yaml.find("\n" + t.name + ":\n"), std::string::npos);
  const nlohmann::json j = te_config_json(*e);
  EXPECT_EQ(j.size(), e->entries.size());
  for (const auto& [name, cfg] : j.items()) {
    for (const char* key : {"method", "num_splits", "num_sm", "cga_size", "set_sm_margin",
                            "aggregate", "atomic_gemm", "use_ce"})
      EXPECT_TRUE(cfg.contains(key)) << name << " " << key;
  }
}

TEST(TeExport, FlagsFollowTheEntries) {
  const Result<TeExport> e = export_for("a6000x8", "llama2-13b", 8);
  ASSERT_TRUE(e.ok()) << e.error().message;
  const auto& args = e->megatron_args;
  const bool rs_dgrad =
      std::find(args.begin(), args.end(), "--tp-comm-overlap-rs-dgrad") != args.end();
  EXPECT_EQ(rs_dgrad, e->runtime.rs_dgrad);
  std::set<std::string> names;
  for (const TeEntry& t : e->entries) names.insert(t.name);
  EXPECT_EQ(names.count("qkv_wgrad") == 0, rs_dgrad);
  // A disabled direction's operators are reported as run sequentially.
  const bool ag_off =
      std::find(args.begin(), args.end(), "--disable-tp-comm-overlap-ag") != args.end();
  for (const TeLayerReport& r : e->layers)
    if (r.role == "qkv_fprop") {
      EXPECT_EQ(r.exported == "off", ag_off);
    }
}

TEST(TeExport, EveryPresetAndModel) {
  int exported = 0;
  for (const std::string& preset : hardware::preset_names()) {
    const hardware::Profile p = *hardware::make_preset(preset);
    for (const workload::ModelConfig& m : workload::builtin_models()) {
      for (int tp : {2, 4, 8}) {
        if (tp > p.gpu_count() || m.heads % tp || m.kv_heads % tp) continue;
        const Result<TeExport> e = export_for(preset, m.name, tp);
        ASSERT_TRUE(e.ok()) << preset << " " << m.name << " tp " << tp << ": "
                            << e.error().message;
        EXPECT_EQ(error_of(e->entries, e->runtime), "") << preset << " " << m.name;
        ++exported;
      }
    }
  }
  EXPECT_GT(exported, 50);
}

TEST(TeExport, Errors) {
  const Result<TeExport> no_sp = export_for("a6000x8", "llama2-13b", 8, 4096, {}, false);
  ASSERT_FALSE(no_sp.ok());
  EXPECT_NE(no_sp.error().message.find("sequence parallelism"), std::string::npos);
  TeExportOptions atomic;
  atomic.atomic_gemm = true;
  const Result<TeExport> no_fp8 = export_for("a6000x8", "llama2-13b", 8, 4096, atomic);
  ASSERT_FALSE(no_fp8.ok());
  EXPECT_NE(no_fp8.error().message.find("needs FP8"), std::string::npos);
  const Result<TeExport> one = export_for("h200x1", "llama2-13b", 1);
  ASSERT_FALSE(one.ok());
  EXPECT_NE(one.error().message.find("no TP communication"), std::string::npos);
}

TEST(TeExport, AtomicGemmKeepsPairsConsistent) {
  TeExportOptions opt;
  opt.fp8 = true;
  opt.atomic_gemm = true;
  const Result<TeExport> e = export_for("h100x8", "llama2-70b", 8, 4096, opt);
  ASSERT_TRUE(e.ok()) << e.error().message;
  EXPECT_EQ(error_of(e->entries, e->runtime), "");
  int atomic = 0;
  for (const TeEntry& t : e->entries) atomic += t.atomic_gemm;
  EXPECT_GT(atomic, 0);
}

}  // namespace
}  // namespace compass::plan
