// The layout search: enumeration, memory filter, ranking, and the first failing constraint.
#include <gtest/gtest.h>

#include "compass/job/search.hpp"
#include "compass/plan/te_export.hpp"
#include "support/job_builders.hpp"

namespace compass::job {
namespace {

Searcher searcher(const std::string& cluster, const std::string& model) {
  return compass::testing::builtin_job(cluster, model).searcher();
}

TEST(Search, RanksFittingLayoutsAndPlansEachShapeOnce) {
  Searcher s = searcher("dgx-h100", "llama2-7b");
  SearchRequest r;
  r.gpus = 16;
  r.global_batch = 64;
  r.seq = 2048;
  r.micro_batches = {1, 2};
  r.top = 4;
  Result<SearchResult> res = s.search(r);
  ASSERT_TRUE(res.ok()) << res.error().message;
  EXPECT_GT(res->fitting, 0);
  EXPECT_LE(res->fitting, res->enumerated);
  ASSERT_EQ(res->top.size(), 4u);
  for (std::size_t i = 1; i < res->top.size(); ++i)
    EXPECT_LE(res->top[i - 1].launch.iteration_s, res->top[i].launch.iteration_s);
  for (const Candidate& c : res->top) {
    EXPECT_EQ(c.layout.gpus(), 16);
    EXPECT_TRUE(c.launch.memory.fits());
  }
  // TP in {1, 2, 4, 8} x micro-batch {1, 2} x SP on/off where TP > 1: at most 14 layer plans.
  EXPECT_LE(s.planned_layers(), 14u);
  EXPECT_EQ(res->best_launch.layout, res->top.front().layout);
}

// The layer shapes planned on one worker or several: the same layouts, prices and ranking, bit
// for bit (each worker plans with a planner of its own; a warm planner plans what a cold one
// does).
TEST(Search, WorkersChangeNothing) {
  SearchRequest r;
  r.gpus = 16;
  r.global_batch = 32;
  r.seq = 4096;
  r.micro_batches = {1, 2};
  r.max_cp = 2;
  r.top = 1000;
  std::vector<SearchResult> results;
  std::vector<std::size_t> shapes;
  for (int threads : {1, 3}) {
    Searcher s = searcher("a6000x8-2nic", "llama2-7b");
    r.threads = threads;
    Result<SearchResult> res = s.search(r);
    ASSERT_TRUE(res.ok()) << res.error().message;
    results.push_back(std::move(res).value());
    shapes.push_back(s.planned_layers());
  }
  const SearchResult& a = results[0];
  const SearchResult& b = results[1];
  EXPECT_EQ(shapes[0], shapes[1]);
  EXPECT_EQ(a.enumerated, b.enumerated);
  EXPECT_EQ(a.fitting, b.fitting);
  ASSERT_EQ(a.top.size(), b.top.size());
  ASSERT_GT(a.top.size(), 10u);
  for (std::size_t i = 0; i < a.top.size(); ++i) {
    SCOPED_TRACE(describe(a.top[i].layout));
    EXPECT_EQ(a.top[i].layout, b.top[i].layout);
    auto same = [](const StepResult& x, const StepResult& y, const char* what) {
      EXPECT_EQ(x.iteration_s, y.iteration_s) << what;
      EXPECT_EQ(x.breakdown.compute_s, y.breakdown.compute_s) << what;
      EXPECT_EQ(x.breakdown.tp_exposed_s, y.breakdown.tp_exposed_s) << what;
    };
    same(a.top[i].megatron, b.top[i].megatron, "megatron");
    same(a.top[i].te, b.top[i].te, "te-default");
    same(a.top[i].compass, b.top[i].compass, "compass");
    same(a.top[i].launch, b.top[i].launch, "launch");
    EXPECT_EQ(a.top[i].launch_without_te, b.top[i].launch_without_te);
  }
}

TEST(Search, RanksByTheLaunchNotByChoicesTeCannotRun) {
  // H100 PCIe boxes, llama2-13b on 8 GPUs: Compass's own choices would be fastest at TP 2, but
  // the launch the search prints there (TE running the exported settings) is slower than TP 1's,
  // which needs no TP overlap at all. The search recommends what the user can run.
  Result<Cluster> cluster =
      resolve_cluster(std::string(COMPASS_SOURCE_DIR) + "/profiles/h100pcie-x8-gen5.json");
  ASSERT_TRUE(cluster.ok()) << cluster.error().message;
  Searcher s(*cluster, workload::resolve_model("llama2-13b").value());
  SearchRequest r;
  r.gpus = 8;
  r.global_batch = 32;
  r.seq = 4096;
  Result<SearchResult> res = s.search(r);
  ASSERT_TRUE(res.ok()) << res.error().message;
  const Candidate& own = res->best_compass;
  const Candidate& win = res->best_launch;
  EXPECT_EQ(own.layout.tp, 2);
  EXPECT_EQ(win.layout.tp, 1);
  EXPECT_LT(own.compass.iteration_s, win.launch.iteration_s);
  EXPECT_GT(own.launch.iteration_s, win.launch.iteration_s);
  EXPECT_TRUE(own.launch_runs_te());
  // TP 1 launches Megatron-LM as it is, and the search says so.
  EXPECT_FALSE(win.launch_runs_te());
  EXPECT_EQ(win.launch.iteration_s, win.megatron.iteration_s);
  EXPECT_EQ(win.layout, res->best_megatron.layout);
  EXPECT_EQ(res->top.front().layout, win.layout);
  EXPECT_FALSE(res->compass_changes_winner());
}

TEST(Search, PricingsHaveOneNameEach) {
  for (Pricing p : {Pricing::megatron, Pricing::te_default, Pricing::compass, Pricing::launch}) {
    const std::optional<Pricing> back = parse_pricing(to_string(p));
    ASSERT_TRUE(back.has_value()) << to_string(p);
    EXPECT_EQ(*back, p);
  }
  EXPECT_EQ(to_string(Pricing::te_default), "te-default");
  for (const char* bad : {"", "te", "Launch", "te_default", "launch "})
    EXPECT_FALSE(parse_pricing(bad).has_value()) << bad;
  // A candidate's price under each name is the matching result.
  Candidate c;
  c.megatron.iteration_s = 1;
  c.te.iteration_s = 2;
  c.compass.iteration_s = 3;
  c.launch.iteration_s = 4;
  EXPECT_EQ(c.priced(Pricing::megatron).iteration_s, 1);
  EXPECT_EQ(c.priced(Pricing::te_default).iteration_s, 2);
  EXPECT_EQ(c.priced(Pricing::compass).iteration_s, 3);
  EXPECT_EQ(c.priced(Pricing::launch).iteration_s, 4);
}

TEST(Search, FixedDimensionsPriceOneLayout) {
  Searcher s = searcher("dgx-h100", "llama2-7b");
  SearchRequest r;
  r.gpus = 16;
  r.global_batch = 64;
  r.seq = 2048;
  r.tp = 4;
  r.pp = 2;
  r.vpp = 2;
  r.micro_batch = 1;
  r.sequence_parallel = true;
  r.recompute = Recompute::selective;
  Result<SearchResult> res = s.search(r);
  ASSERT_TRUE(res.ok()) << res.error().message;
  EXPECT_EQ(res->enumerated, 1);
  EXPECT_EQ(res->top.front().layout.dp, 2);
  EXPECT_EQ(res->top.front().layout.vpp, 2);
}

TEST(Search, NamesTheBatchConstraint) {
  Searcher s = searcher("dgx-h100", "llama2-7b");
  SearchRequest r;
  r.gpus = 16;
  r.global_batch = 1001;  // odd: no micro-batch x DP divides it but DP 1, which 16 GPUs cannot have
  r.seq = 2048;
  r.tp = 8;
  r.pp = 1;
  Result<SearchResult> res = s.search(r);
  ASSERT_FALSE(res.ok());
  EXPECT_NE(res.error().message.find("global batch 1001 is not a multiple"), std::string::npos)
      << res.error().message;
}

// A fixed TP, PP or micro-batch that no layout of the GPUs can take is named as given, not
// reported as the batch constraint of an empty enumeration.
TEST(Search, NamesAFixedDimensionNoLayoutCanTake) {
  Searcher s = searcher("dgx-h100", "llama2-7b");
  auto error_of = [&](auto fix) {
    SearchRequest r;
    r.gpus = 8;
    r.global_batch = 8;
    r.seq = 2048;
    fix(r);
    Result<SearchResult> res = s.search(r);
    return res.ok() ? std::string("(no error)") : res.error().message;
  };
  EXPECT_EQ(error_of([](SearchRequest& r) { r.tp = 16; }),
            "TP 16 is larger than a node of dgx-h100 (8 GPUs)");
  EXPECT_EQ(error_of([](SearchRequest& r) { r.tp = 3; }), "TP 3 does not divide the 8 GPUs");
  EXPECT_EQ(error_of([](SearchRequest& r) { r.tp = 0; }), "TP 0 must be positive");
  EXPECT_EQ(error_of([](SearchRequest& r) { r.pp = 3; }),
            "PP 3 does not divide 8 GPUs / TP for any TP (1, 2, 4, 8)");
  EXPECT_EQ(error_of([](SearchRequest& r) {
              r.tp = 2;
              r.pp = 8;
            }),
            "PP 8 does not divide the 4 GPUs left by TP 2");
  EXPECT_EQ(error_of([](SearchRequest& r) { r.pp = 33; }),
            "PP 33 is not in 1..32 (the layers of llama2-7b)");
  EXPECT_EQ(error_of([](SearchRequest& r) { r.micro_batch = 3; }),
            "global batch 8 is not a multiple of micro-batch 3");
  EXPECT_EQ(error_of([](SearchRequest& r) { r.vpp = 3; }),
            "VPP 3: no PP among 2, 4, 8 splits the 32 layers of llama2-7b into PP x 3 chunks");
  EXPECT_EQ(error_of([](SearchRequest& r) {
              r.vpp = 2;
              r.tp = 8;
            }),
            "VPP 2 needs a pipeline of more than one stage, and these GPUs allow none");
  EXPECT_EQ(error_of([](SearchRequest& r) {
              r.vpp = 2;
              r.pp = 2;
            }),
            "(no error)");
  // Fixed values some layout can take still search.
  EXPECT_EQ(error_of([](SearchRequest& r) {
              r.tp = 2;
              r.pp = 4;
              r.micro_batch = 1;
            }),
            "(no error)");
}

TEST(Search, NamesTheMemoryShortfall) {
  Searcher s = searcher("dgx-h100", "llama3-405b");
  SearchRequest r;
  r.gpus = 8;
  r.global_batch = 8;
  r.seq = 8192;
  Result<SearchResult> res = s.search(r);
  ASSERT_FALSE(res.ok());
  EXPECT_NE(res.error().message.find("smallest layout needs"), std::string::npos)
      << res.error().message;
}

TEST(Search, RefusesHugeInputs) {
  Searcher s = searcher("dgx-h100", "llama2-7b");
  SearchRequest r;
  r.gpus = std::int64_t{1} << 30;
  EXPECT_FALSE(s.search(r).ok());
  r.gpus = 12;  // not whole nodes
  Result<SearchResult> res = s.search(r);
  ASSERT_FALSE(res.ok());
  EXPECT_NE(res.error().message.find("whole nodes"), std::string::npos);
}

Layout tp_layout(int tp, int dp, int mbs, int global_batch, bool sp) {
  Layout l;
  l.tp = tp;
  l.dp = dp;
  l.micro_batch = mbs;
  l.global_batch = global_batch;
  l.seq = 4096;
  l.sequence_parallel = sp;
  return l;
}

TEST(Search, TheExportedSettingsPriceWhatTeRuns) {
  // One stage, one replica: the stage is busy m x layers x (the layer's TP operators + the rest)
  // plus the edges, so the exported step is busy longer than Compass's own by m x layers x what
  // the export's report says its settings add per layer.
  for (const char* cluster : {"dgx-h100", "a6000x8-2nic"}) {
    SCOPED_TRACE(cluster);
    Searcher s = searcher(cluster, "llama2-13b");
    const Layout l = tp_layout(8, 1, 2, 8, true);
    Result<Candidate> c = s.price(l);
    Result<StepResult> e = s.price_as_exported(l);
    ASSERT_TRUE(c.ok() && e.ok()) << (c.ok() ? e.error().message : c.error().message);
    Result<plan::LayerPlan> lp = plan_for(s.cluster(), s.model(), l);
    ASSERT_TRUE(lp.ok());
    Result<plan::TeExport> ex = plan::export_te(s.cluster().node, *lp, {});
    ASSERT_TRUE(ex.ok()) << ex.error().message;
    const double busy_e = e->breakdown.compute_s + e->breakdown.tp_exposed_s;
    const double busy_c = c->compass.breakdown.compute_s + c->compass.breakdown.tp_exposed_s;
    const double per_layer = ex->exported_s - ex->compass_s;
    EXPECT_NEAR(busy_e - busy_c, l.microbatches() * s.model().layers * per_layer, 1e-9 * busy_c);
    EXPECT_NE(per_layer, 0.0);
  }
  // On the PCIe boxes at TP 8 Compass chooses trees, which TE cannot run: the launch's
  // expectation is far from Compass's own, and no better than TE's defaults by much.
  Searcher s = searcher("a6000x8-2nic", "llama2-13b");
  const Layout l = tp_layout(8, 4, 4, 128, true);
  Result<Candidate> c = s.price(l);
  Result<StepResult> e = s.price_as_exported(l);
  ASSERT_TRUE(c.ok() && e.ok()) << (c.ok() ? e.error().message : c.error().message);
  EXPECT_GT(e->iteration_s, 1.1 * c->compass.iteration_s);
  EXPECT_GT(e->iteration_s, 0.99 * c->te.iteration_s);
  // Without sequence parallelism there is no TE overlap to export: the export's error.
  Result<StepResult> no_sp = s.price_as_exported(tp_layout(8, 4, 4, 128, false));
  ASSERT_FALSE(no_sp.ok());
  EXPECT_NE(no_sp.error().message.find("sequence parallel"), std::string::npos)
      << no_sp.error().message;
}

TEST(MegatronArgs, NameEveryKnob) {
  Layout l;
  l.tp = 8;
  l.pp = 4;
  l.vpp = 2;
  l.dp = 2;
  l.micro_batch = 1;
  l.global_batch = 64;
  l.seq = 4096;
  l.sequence_parallel = true;
  l.recompute = Recompute::selective;
  // One word each: every flag's value its own word, right after it.
  const std::vector<std::string> want = {"--tensor-model-parallel-size",
                                         "8",
                                         "--pipeline-model-parallel-size",
                                         "4",
                                         "--num-layers-per-virtual-pipeline-stage",
                                         "10",
                                         "--micro-batch-size",
                                         "1",
                                         "--global-batch-size",
                                         "64",
                                         "--seq-length",
                                         "4096",
                                         "--sequence-parallel",
                                         "--recompute-activations",
                                         "--use-distributed-optimizer",
                                         "--overlap-grad-reduce",
                                         "--overlap-param-gather"};
  // Compass's TP overlap settings are the export's, not these.
  EXPECT_EQ(megatron_args(l, 80, plan::Config::compass), want);
  std::vector<std::string> te = want;
  te.push_back("--tp-comm-overlap");
  EXPECT_EQ(megatron_args(l, 80, plan::Config::te_default), te);
  EXPECT_EQ(megatron_args(l, 80, plan::Config::megatron), want);
  // Full recomputation, FP8, and TE's overlap without SP (none).
  l.recompute = Recompute::full;
  l.fp8 = true;
  l.sequence_parallel = false;
  std::string all;
  for (const std::string& a : megatron_args(l, 80, plan::Config::te_default)) all += a + " ";
  EXPECT_NE(all.find("--recompute-granularity full --recompute-method uniform "
                     "--recompute-num-layers 1 "),
            std::string::npos)
      << all;
  EXPECT_NE(all.find("--fp8-format hybrid"), std::string::npos) << all;
  EXPECT_EQ(all.find("--tp-comm-overlap"), std::string::npos) << all;
  // Uneven stages: 126 layers on 16 stages, middle stages 8, first and last 7.
  l.vpp = 1;
  l.pp = 16;
  all.clear();
  for (const std::string& a : megatron_args(l, 126, plan::Config::megatron)) all += a + " ";
  EXPECT_NE(all.find("--decoder-first-pipeline-num-layers 7"), std::string::npos) << all;
  EXPECT_NE(all.find("--decoder-last-pipeline-num-layers 7"), std::string::npos) << all;
}

}  // namespace
}  // namespace compass::job
