// The TransformerEngine export: the rules every configuration must satisfy, exports for every
// preset and built-in model, and what the per-layer report claims.

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>

#include "compass/hardware/presets.hpp"
#include "compass/model/estimate.hpp"
#include "compass/plan/te_compare.hpp"
#include "compass/plan/te_export.hpp"
#include "compass/plan/te_model.hpp"

namespace compass::plan {
namespace {

using schedule::StrategyKind;

TeRuntime runtime(int tp = 8, std::int64_t rows = 512, bool fp8 = false, bool rs_dgrad = false,
                  bool first_last_bf16 = false) {
  TeRuntime rt;
  rt.tp = tp;
  rt.rows_per_rank = rows;
  rt.fp8 = fp8;
  rt.rs_dgrad = rs_dgrad;
  rt.first_last_bf16 = first_last_bf16;
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
  pc.seq = seq / opt.cp;
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
  for (const TeEntry& t : e->entries)
    for (const std::string& key : te_keys_read(t.name, t.method, false))
      EXPECT_TRUE(j.at(t.name).contains(key)) << t.name << " " << key;
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
    if (!p.p2p) continue;  // refused: TeExport.NoPeerAccessIsRefused
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
  // atomic_gemm is read since TransformerEngine 1.6; --fp8-recipe since megatron-core 0.12.
  const auto& req = e->requirements;
  EXPECT_NE(std::find(req.begin(), req.end(), te_release_requirement(e->entries)), req.end());
  EXPECT_EQ(te_release_requirement(e->entries),
            "TransformerEngine 1.6 or newer (atomic_gemm: a key older releases do not read); "
            "compass doctor prints the installed version");
  EXPECT_NE(std::find(req.begin(), req.end(),
                      "megatron-core 0.12 or newer (Megatron-LM's --fp8-recipe); compass doctor "
                      "prints the installed version"),
            req.end());
}

TEST(TeExport, Fp8BuffersNeedTe16) {
  std::vector<TeEntry> es = defaults();
  EXPECT_EQ(te_release_requirement(es), "");
  entry(es, "proj_fprop").fp8_buf = true;
  entry(es, "fc2_fprop").fp8_buf = true;
  entry(es, "fc2_fprop").atomic_gemm = true;
  EXPECT_EQ(te_release_requirement(es),
            "TransformerEngine 1.6 or newer (fp8_buf, atomic_gemm: keys older releases do not "
            "read); compass doctor prints the installed version");
}

TEST(TeExport, ABf16ExportNeedsNoNewerRelease) {
  const Result<TeExport> e = export_for("h100x8", "llama2-70b", 8, 4096);
  ASSERT_TRUE(e.ok()) << e.error().message;
  for (const TeEntry& t : e->entries) EXPECT_FALSE(t.fp8_buf || t.atomic_gemm) << t.name;
  EXPECT_TRUE(e->requirements.empty());
}

// The backward blocks pair like the forward ones: an atomic ring-exchange all-gather of the
// output gradient needs the matching data-gradient reduce-scatter atomic on ring exchange too.
TEST(TeRules, BackwardAtomicPairs) {
  for (const auto& [ag, rs] : {std::pair{"proj_dgrad", "qkv_dgrad"}, std::pair{"fc2_dgrad", "fc1_dgrad"}}) {
    std::vector<TeEntry> es = defaults();
    entry(es, ag).atomic_gemm = true;  // its pair is bulk
    EXPECT_NE(error_of(es, runtime(8, 512, true)).find(std::string("its pair ") + rs + " must too"),
              std::string::npos)
        << ag;
  }
  // Both sides atomic ring exchange (the rs-dgrad layout) pass.
  std::vector<TeEntry> es = defaults();
  std::erase_if(es, [](const TeEntry& e) { return e.name.ends_with("_wgrad"); });
  for (const char* n : {"qkv_dgrad", "fc1_dgrad"}) {
    TeEntry ring = *te_default_entry("qkv_fprop", 8);
    ring.name = n;
    entry(es, n) = ring;
  }
  for (const char* n : {"proj_dgrad", "qkv_dgrad", "fc2_dgrad", "fc1_dgrad"}) entry(es, n).atomic_gemm = true;
  EXPECT_EQ(error_of(es, runtime(8, 512, true, true)), "");
  entry(es, "qkv_dgrad").atomic_gemm = false;
  EXPECT_NE(error_of(es, runtime(8, 512, true, true)).find("proj_dgrad"), std::string::npos);
}

TEST(TeRules, FirstLastLayersBf16) {
  std::vector<TeEntry> es = defaults();
  EXPECT_EQ(error_of(es, runtime(8, 512, true, false, true)), "");
  entry(es, "proj_fprop").atomic_gemm = true;  // an atomic pipeline: fine in FP8 alone
  EXPECT_EQ(error_of(es, runtime(8, 512, true)), "");
  EXPECT_NE(error_of(es, runtime(8, 512, true, false, true)).find("--first-last-layers-bf16"),
            std::string::npos);
  es = defaults();
  std::erase_if(es, [](const TeEntry& e) { return e.name.ends_with("_wgrad"); });
  entry(es, "qkv_dgrad").method = TeMethod::pipeline;
  entry(es, "fc1_dgrad").method = TeMethod::pipeline;
  EXPECT_EQ(error_of(es, runtime(8, 512, true, true)), "");
  EXPECT_NE(error_of(es, runtime(8, 512, true, true, true)).find("keep it bulk"), std::string::npos);
}

TEST(TeRules, Fp8BufOnlyOnPipelineReduceScatter) {
  std::vector<TeEntry> es = defaults();
  entry(es, "proj_fprop").fp8_buf = true;
  EXPECT_EQ(error_of(es, runtime(8, 512, true)), "");
  EXPECT_NE(error_of(es, runtime(8, 512, false)).find("fp8_buf needs FP8"), std::string::npos);
  es = defaults();
  entry(es, "qkv_fprop").fp8_buf = true;
  EXPECT_NE(error_of(es, runtime(8, 512, true)).find("applies only"), std::string::npos);
}

TEST(TeKeys, OnlyWhatTeReads) {
  const auto ring = te_keys_read("qkv_fprop", TeMethod::ring_exchange, false);
  EXPECT_EQ(std::count(ring.begin(), ring.end(), "num_splits"), 0);  // ring takes tp steps
  EXPECT_EQ(std::count(ring.begin(), ring.end(), "aggregate"), 1);
  const auto rs_ring = te_keys_read("proj_fprop", TeMethod::ring_exchange, false);
  EXPECT_EQ(std::count(rs_ring.begin(), rs_ring.end(), "aggregate"), 0);
  const auto pipe = te_keys_read("proj_fprop", TeMethod::pipeline, true);
  EXPECT_EQ(std::count(pipe.begin(), pipe.end(), "use_ce"), 0);
  EXPECT_EQ(std::count(pipe.begin(), pipe.end(), "fp8_buf"), 1);
  EXPECT_EQ(te_keys_read("qkv_wgrad", TeMethod::bulk, true).size(), 4u);
  const Result<TeExport> e = export_for("a6000x8", "llama2-13b", 8);
  ASSERT_TRUE(e.ok()) << e.error().message;
  const nlohmann::json j = te_config_json(*e);
  for (const TeEntry& t : e->entries)
    EXPECT_EQ(j.at(t.name).size(), te_keys_read(t.name, t.method, false).size()) << t.name;
}

TEST(TeLaunch, ShellQuote) {
  EXPECT_EQ(shell_quote("a b"), "'a b'");
  EXPECT_EQ(shell_quote("x$(touch P)'y"), "'x$(touch P)'\\''y'");
  TeExport e;
  e.env = {{"CUDA_VISIBLE_DEVICES", "0,1"}};
  e.megatron_args = {"--tp-comm-overlap-cfg", "/tmp/x$(touch P).yaml"};
  const std::string script = te_launch_script(e);
  EXPECT_NE(script.find("export CUDA_VISIBLE_DEVICES='0,1'\n"), std::string::npos);
  EXPECT_NE(script.find("'/tmp/x$(touch P).yaml'"), std::string::npos) << script;
}

TEST(TeLaunch, MulticastOnlyOnHopperNvswitch) {
  const hardware::Profile h100 = *hardware::make_preset("h100x8");
  const hardware::Profile a100 = *hardware::make_preset("a100x8");
  const hardware::Profile a6000 = *hardware::make_preset("a6000x8");
  EXPECT_TRUE(te_cuda_multicast(h100, {0, 1, 2, 3}));
  EXPECT_FALSE(te_cuda_multicast(a100, {0, 1, 2, 3}));  // NVSwitch, but sm_80
  EXPECT_FALSE(te_cuda_multicast(a6000, {0, 1}));
  auto skipmc = [](const TeExport& e) {
    for (const auto& [k, v] : e.env)
      if (k == "UB_SKIPMC") return v == "1";
    return false;
  };
  const Result<TeExport> on_h100 = export_for("h100x8", "llama2-70b", 4);
  ASSERT_TRUE(on_h100.ok()) << on_h100.error().message;
  EXPECT_FALSE(skipmc(*on_h100));
  EXPECT_TRUE(on_h100->multicast);
  for (const char* preset : {"a6000x8", "a100x8"}) {
    const Result<TeExport> e = export_for(preset, "llama2-13b", 4);
    ASSERT_TRUE(e.ok()) << e.error().message;
    EXPECT_TRUE(skipmc(*e)) << preset;
  }
}

TEST(TeLaunch, NoPeerAccessIsRefused) {
  const Result<TeExport> e = export_for("rtx4090x8", "llama2-13b", 4);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.error().message.find("no peer-to-peer access"), std::string::npos)
      << e.error().message;
  EXPECT_EQ(e.error().message.find('\n'), std::string::npos);
}

TEST(TeLaunch, EveryTpGroupOfTheNode) {
  const Result<TeExport> e = export_for("a6000x8", "llama2-13b", 4);
  ASSERT_TRUE(e.ok()) << e.error().message;
  ASSERT_EQ(e->groups.size(), 2u);
  std::vector<int> all = e->device_order;
  std::sort(all.begin(), all.end());
  EXPECT_EQ(all, (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
  // The first tp devices are the planned group; each group is a ring of distinct GPUs.
  for (std::size_t g = 0; g < e->groups.size(); ++g) {
    ASSERT_EQ(e->groups[g].size(), 4u);
    for (std::size_t i = 0; i < 4; ++i) EXPECT_EQ(e->device_order[g * 4 + i], e->groups[g][i]);
  }
}

TEST(TeExport, AtomicGemmRequirementsAndPairs) {
  TeExportOptions opt;
  opt.fp8 = true;
  opt.atomic_gemm = true;
  for (const char* model : {"llama2-70b", "llama2-13b"})  // FP8 presets: h100x8
    for (int tp : {2, 4, 8}) {
      const Result<TeExport> e = export_for("h100x8", model, tp, 4096, opt);
      ASSERT_TRUE(e.ok()) << e.error().message;
      EXPECT_EQ(error_of(e->entries, e->runtime), "");
      std::string req;
      for (const std::string& r : e->requirements) req += r + "\n";
      EXPECT_NE(req.find("12.2"), std::string::npos);
      EXPECT_NE(req.find("delayed"), std::string::npos);
      const auto& a = e->megatron_args;
      EXPECT_NE(std::find(a.begin(), a.end(), "delayed"), a.end());
    }
}

TEST(TeExport, FirstLastLayersBf16) {
  TeExportOptions opt;
  opt.fp8 = true;
  opt.first_last_layers_bf16 = true;
  for (const char* model : {"llama2-70b", "llama2-13b"})
    for (int tp : {2, 4, 8}) {
      const Result<TeExport> e = export_for("h100x8", model, tp, 4096, opt);
      ASSERT_TRUE(e.ok()) << e.error().message;
      EXPECT_FALSE(e->runtime.rs_dgrad);
      for (const TeEntry& t : e->entries) EXPECT_FALSE(t.atomic_gemm) << t.name;
    }
  opt.atomic_gemm = true;
  EXPECT_FALSE(export_for("h100x8", "llama2-13b", 8, 4096, opt).ok());
  TeExportOptions bf16;
  bf16.first_last_layers_bf16 = true;
  EXPECT_FALSE(export_for("h100x8", "llama2-13b", 8, 4096, bf16).ok());
  TeExportOptions delay;
  delay.delay_wgrad_compute = true;
  const Result<TeExport> d = export_for("h100x8", "llama2-13b", 8, 4096, delay);
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.error().message.find("--delay-wgrad-compute"), std::string::npos);
}

TEST(TeExport, ContextParallelSizesTheBuffers) {
  TeExportOptions opt;
  opt.cp = 2;
  const Result<TeExport> e = export_for("h100x8", "llama2-13b", 4, 8192, opt);
  ASSERT_TRUE(e.ok()) << e.error().message;
  EXPECT_EQ(e->seq, 8192);
  EXPECT_EQ(e->runtime.rows_per_rank, 8192 / 2 / 4);
  const auto& a = e->megatron_args;
  const auto it = std::find(a.begin(), a.end(), "--context-parallel-size");
  ASSERT_NE(it, a.end());
  EXPECT_EQ(*(it + 1), "2");
  // tp 4 x cp 4 = 16 GPUs: the CP ranks span two machines, whose TP groups each hold their own
  // userbuffers; the export says so.
  opt.cp = 4;
  const Result<TeExport> wide = export_for("h100x8", "llama2-13b", 4, 8192, opt);
  ASSERT_TRUE(wide.ok()) << wide.error().message;
  EXPECT_EQ(wide->runtime.rows_per_rank, 8192 / 4 / 4);
  EXPECT_TRUE(std::any_of(wide->notes.begin(), wide->notes.end(), [](const std::string& n) {
    return n.find("span more than one") != std::string::npos;
  }));
}

// In an FP8 run TE keeps reduce-scatter buffers in BF16 except a pipeline's with fp8_buf: the
// export prices them so, and sets fp8_buf where it pipelines a forward reduce-scatter.
TEST(TeExport, Fp8ReduceScatterBytes) {
  const hardware::Profile p = *hardware::make_preset("h100x8");
  workload::ParallelConfig pc;
  pc.tp = 8;
  pc.seq = 4096;
  pc.dtype = DType::fp8;
  const LayerPlan lp = *plan_layer(p, *workload::resolve_model("llama2-13b"), pc);
  TeExportOptions opt;
  opt.fp8 = true;
  const Result<TeExport> e = export_te(p, lp, opt);
  ASSERT_TRUE(e.ok()) << e.error().message;
  model::Caches caches;
  for (const PlannedOp& po : lp.ops) {
    const workload::OperatorSpec& op = po.choice.op;
    if (op.kind == workload::OpKind::ag_gemm) continue;  // FP8 buffers: priced as planned
    const double extra = *te_bf16_buffer_extra_s(p, op, lp.plan, caches);
    EXPECT_GT(extra, 0.0) << op.role;
    workload::OperatorSpec bf = op;
    bf.dtype = DType::bf16;
    EXPECT_EQ(*te_bf16_buffer_extra_s(p, bf, lp.plan, caches), 0.0);
    for (const TeLayerReport& r : e->layers) {
      if (r.role != op.role || r.exported != "ring_exchange") continue;
      const double fp8_only =
          *model::estimate_time_s(p, op, r.exported_as, lp.plan, model::ModelKnobs{});
      EXPECT_NEAR(r.exported_s, fp8_only + extra, 1e-12) << r.role;
    }
  }
  const auto& args = e->megatron_args;
  const bool rs_off =
      std::find(args.begin(), args.end(), "--disable-tp-comm-overlap-rs") != args.end();
  for (const TeEntry& t : e->entries) {
    if (rs_off && (t.name == "proj_fprop" || t.name == "fc2_fprop")) continue;  // unused
    EXPECT_EQ(t.fp8_buf, t.method == TeMethod::pipeline &&
                             (t.name == "proj_fprop" || t.name == "fc2_fprop"))
        << t.name;
  }
}

// Bulk overlap: the collective beside another GEMM costs the GEMM the SMs it takes and hides
// up to the GEMM's time; the export keeps bulk unless rs-dgrad predicts faster.
TEST(TeModel, BulkPhase) {
  const hardware::Profile p = *hardware::make_preset("h100x8");
  workload::ParallelConfig pc;
  pc.tp = 8;
  pc.seq = 4096;
  const LayerPlan lp = *plan_layer(p, *workload::resolve_model("llama2-70b"), pc);
  const PlannedOp* dgrad = nullptr;
  const PlannedOp* wgrad = nullptr;
  for (const PlannedOp& po : lp.ops) {
    if (po.choice.op.role == "qkv_dgrad") dgrad = &po;
    if (po.choice.op.role == "qkv_wgrad") wgrad = &po;
  }
  ASSERT_TRUE(dgrad && wgrad);
  const model::Estimate& g = dgrad->megatron;
  const model::Estimate& c = wgrad->megatron;
  model::Caches caches;
  std::optional<TeBulkPhase> fastest;  // over every choice, ties to the first (fewer SMs)
  for (int n : te_bulk_sm_choices())
    for (bool margin : {true, false}) {
      const TeBulkPhase ph =
          *te_bulk_phase(p, dgrad->choice.op, wgrad->choice.op, lp.plan, n, margin, false, caches);
      EXPECT_GE(ph.gemm_s, g.compute_s) << n;
      EXPECT_GE(ph.comm_s, c.comm_s) << n;
      EXPECT_GE(ph.total_s, std::max(ph.gemm_s, ph.comm_s)) << n;
      if (!fastest || ph.total_s < fastest->total_s * (1 - 1e-9)) fastest = ph;
    }
  // With the margin the GEMM loses more as the collective takes more SMs.
  const TeBulkPhase few =
      *te_bulk_phase(p, dgrad->choice.op, wgrad->choice.op, lp.plan, 2, true, false, caches);
  const TeBulkPhase many =
      *te_bulk_phase(p, dgrad->choice.op, wgrad->choice.op, lp.plan, 32, true, false, caches);
  EXPECT_LT(few.gemm_s, many.gemm_s);
  EXPECT_GE(few.comm_s, many.comm_s);
  const TeBulkPhase best =
      *te_best_bulk_phase(p, dgrad->choice.op, wgrad->choice.op, lp.plan, false, caches);
  EXPECT_LE(best.total_s, few.total_s);
  EXPECT_LE(best.total_s, many.total_s);
  // The best phase is one of the phases te_bulk_phase prices, to the bit.
  ASSERT_TRUE(fastest.has_value());
  EXPECT_EQ(best.num_sm, fastest->num_sm);
  EXPECT_EQ(best.set_sm_margin, fastest->set_sm_margin);
  EXPECT_EQ(best.total_s, fastest->total_s);
  EXPECT_EQ(best.gemm_s, fastest->gemm_s);
  EXPECT_EQ(best.comm_s, fastest->comm_s);
  // Overlapped at its best, it beats the GEMM and the collective one after the other.
  EXPECT_LT(best.total_s, g.compute_s + g.overhead_s + c.comm_s + c.overhead_s);
}

TEST(TeExport, RsDgradOnlyWhereFasterThanBulk) {
  int checked = 0;
  for (const char* preset : {"a6000x8", "h100x8", "a100x8"})
    for (const char* model : {"llama2-13b", "llama2-70b"})
      for (int tp : {2, 4, 8}) {
        const hardware::Profile p = *hardware::make_preset(preset);
        workload::ParallelConfig pc;
        pc.tp = tp;
        pc.seq = 4096;
        const LayerPlan lp = *plan_layer(p, *workload::resolve_model(model), pc);
        const Result<TeExport> e = export_te(p, lp, {});
        ASSERT_TRUE(e.ok()) << e.error().message;
        std::map<std::string, const PlannedOp*> ops;
        for (const PlannedOp& po : lp.ops) ops[po.choice.op.role] = &po;
        model::Caches caches;
        double bulk = 0, exported = 0;
        for (const char* d : {"qkv_dgrad", "fc1_dgrad"}) {
          const std::string wg = std::string(d).substr(0, std::string(d).size() - 5) + "wgrad";
          bulk +=
              te_best_bulk_phase(p, ops[d]->choice.op, ops[wg]->choice.op, lp.plan, false, caches)
                  ->total_s;
          bulk +=
              te_best_bulk_phase(p, ops[wg]->choice.op, ops[d]->choice.op, lp.plan, true, caches)
                  ->total_s;
          for (const TeLayerReport& r : e->layers)
            if (r.role == d || r.role == wg) exported += r.exported_s;
        }
        if (e->runtime.rs_dgrad) {
          EXPECT_LT(exported, bulk) << preset << " " << model << " tp " << tp;
        } else {
          EXPECT_NEAR(exported, bulk, 1e-12) << preset << " " << model << " tp " << tp;
        }
        ++checked;
      }
  EXPECT_EQ(checked, 18);
}

// A preset holding exactly the export's own configuration compares as the same everywhere and
// is priced, operator by operator, as the export priced it: both sides use one pricing.
TEST(TeCompare, OwnConfigurationIsTheSame) {
  int compared = 0;
  for (const char* preset : {"h100x8", "a6000x8"})
    for (int tp : {2, 4, 8})
      for (bool fp8 : {false, true}) {
        if (fp8 && std::string(preset) != "h100x8") continue;
        const hardware::Profile p = *hardware::make_preset(preset);
        workload::ParallelConfig pc;
        pc.tp = tp;
        pc.seq = 4096;
        pc.dtype = fp8 ? DType::fp8 : DType::bf16;
        const LayerPlan lp = *plan_layer(p, *workload::resolve_model("llama2-13b"), pc);
        TeExportOptions opt;
        opt.fp8 = fp8;
        const Result<TeExport> e = export_te(p, lp, opt);
        ASSERT_TRUE(e.ok()) << e.error().message;
        const auto& args = e->megatron_args;
        if (std::any_of(args.begin(), args.end(),
                        [](const std::string& a) { return a.starts_with("--disable-tp-comm"); }))
          continue;  // a direction off: the entries stay at TE's defaults, unused
        const nlohmann::json j = {{"name", "own"}, {"tp", tp}, {"layers", te_config_json(*e)}};
        const Result<TePreset> own = parse_te_preset(j, "own");
        ASSERT_TRUE(own.ok()) << own.error().message;
        const Result<TeComparison> c = compare_te(p, lp, *e, *own);
        ASSERT_TRUE(c.ok()) << c.error().message;
        for (const TeEntryDiff& d : c->entries)
          EXPECT_TRUE(d.differences.empty()) << preset << " tp " << tp << " " << d.name << ": "
                                             << d.differences.front();
        double sum = 0;
        for (const TeRoleDiff& r : c->roles) {
          EXPECT_NEAR(r.preset_s, r.compass_s, 1e-12) << preset << " tp " << tp << " " << r.role;
          sum += r.preset_s;
        }
        EXPECT_NEAR(c->preset_s, sum, 1e-12);
        const nlohmann::json cj = to_json(*c);
        EXPECT_EQ(cj.at("roles").size(), c->roles.size());
        EXPECT_EQ(cj.at("entries").size(), te_layer_names().size());
        EXPECT_NEAR(cj.at("total").at("preset_minus_compass_s").get<double>(), 0.0, 1e-12);
        ++compared;
      }
  EXPECT_GT(compared, 0);
}

TEST(TeCompare, ReadsPresetsAsTeDoes) {
  const nlohmann::json j = nlohmann::json::parse(R"({
    "name": "p", "tp": 4,
    "layers": {
      "proj_fprop": {"method": "pipeline", "num_sm": 24, "cga_size": 2, "num_splits": 4,
                     "set_sm_margin": true, "fp8_buf": [false]},
      "fc1_dgrad": {"method": "pipeline", "num_sm": 16, "cga_size": 2, "num_splits": 4,
                    "set_sm_margin": true},
      "qkv_fprop": {"method": "ring_exchange", "num_splits": 9}
    }})");
  const Result<TePreset> pr = parse_te_preset(j, "p");
  ASSERT_TRUE(pr.ok()) << pr.error().message;
  auto get = [&](const std::string& n) -> const TeEntry* {
    for (const TeEntry& e : pr->entries)
      if (e.name == n) return &e;
    return nullptr;
  };
  ASSERT_NE(get("proj_fprop"), nullptr);
  EXPECT_TRUE(get("proj_fprop")->fp8_buf);            // a non-empty list is true to Python
  EXPECT_EQ(get("qkv_fprop")->num_splits, 4);         // ring exchange takes tp steps
  EXPECT_EQ(get("fc1_wgrad"), nullptr);               // its dgrad carries the reduce-scatter
  ASSERT_NE(get("qkv_wgrad"), nullptr);               // TE's default, bulk
  EXPECT_EQ(get("qkv_wgrad")->method, TeMethod::bulk);
  EXPECT_EQ(get("qkv_wgrad")->num_sm, 16);
  EXPECT_FALSE(parse_te_preset(nlohmann::json::parse(R"({"tp": 4, "layers": {"qkv_fwd": {}}})"), "x").ok());
  EXPECT_FALSE(parse_te_preset(nlohmann::json::parse(R"({"layers": {}})"), "x").ok());
  // The preset's tp must be the plan's.
  const Result<TeExport> e = export_for("h100x8", "llama2-13b", 8);
  ASSERT_TRUE(e.ok());
  const hardware::Profile p = *hardware::make_preset("h100x8");
  workload::ParallelConfig pc;
  pc.tp = 8;
  pc.seq = 4096;
  const LayerPlan lp = *plan_layer(p, *workload::resolve_model("llama2-13b"), pc);
  const Result<TeComparison> c = compare_te(p, lp, *e, *pr);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.error().message.find("tp 4"), std::string::npos);
}

// Every published preset in tests/data/te_presets reads, and is a 10-layer configuration of its tp.
TEST(TeCompare, EveryPublishedPresetReads) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(COMPASS_SOURCE_DIR) / "tests" / "data" / "te_presets";
  int read = 0;
  for (const auto& f : fs::directory_iterator(dir)) {
    if (f.path().extension() != ".json") continue;
    std::ifstream in(f.path());
    const nlohmann::json j = nlohmann::json::parse(in);
    const Result<TePreset> pr = parse_te_preset(j, f.path().stem().string());
    ASSERT_TRUE(pr.ok()) << f.path() << ": " << pr.error().message;
    EXPECT_EQ(pr->name, f.path().stem().string());
    EXPECT_GE(pr->entries.size(), 8u);
    EXPECT_FALSE(pr->source.empty());
    ++read;
  }
  EXPECT_GT(read, 0);
}

}  // namespace
}  // namespace compass::plan
