// Layer plans, end-to-end estimates and the sweep on the presets.

#include <gtest/gtest.h>

#include <bit>
#include <cstdint>

#include "compass/hardware/presets.hpp"
#include "compass/plan/layer_plan.hpp"
#include "compass/plan/report.hpp"
#include "compass/plan/sweep.hpp"

namespace compass::plan {
namespace {

using schedule::StrategyKind;

hardware::Profile a6000() { return *hardware::make_preset("a6000x8"); }

TEST(LayerPlan, Llama13bOnA6000) {
  const hardware::Profile p = a6000();
  workload::ParallelConfig pc;
  pc.tp = 8;
  pc.seq = 4096;
  const Result<LayerPlan> lp = plan_layer(p, *workload::resolve_model("llama2-13b"), pc);
  ASSERT_TRUE(lp.ok()) << lp.error().message;
  EXPECT_EQ(lp->ops.size(), 10u);
  for (const PlannedOp& po : lp->ops) {
    // Compass picks the minimum of the strategies it considers, sequential included.
    EXPECT_LE(po.compass().total_s, po.megatron.total_s * (1 + model::kTieTolerance));
  }
  EXPECT_LE(lp->compass.total_s, lp->megatron.total_s);
  EXPECT_GT(lp->other.attention_fwd_s, 0);
  EXPECT_GT(lp->other.plain_gemm_bwd_s, 0);  // proj and fc2 weight gradients
  EXPECT_NEAR(lp->compass.total_s,
              lp->model.layers * (lp->compass.tp_ops_s + lp->other.total_s()) + lp->lm_head_s,
              1e-12);
  const nlohmann::json j = to_json(*lp);
  EXPECT_EQ(j["ops"].size(), 10u);
}

TEST(LayerPlan, AttentionRunsInBf16InAnFp8Plan) {
  // TransformerEngine's FP8 recipes keep dot-product attention in BF16: an FP8 plan's GEMMs run
  // at the FP8 rate, its attention at the BF16 one.
  const hardware::Profile p = *hardware::make_preset("h100x8");
  workload::ParallelConfig pc;
  pc.tp = 4;
  pc.seq = 8192;
  const workload::ModelConfig m = *workload::resolve_model("llama2-13b");
  const Result<LayerPlan> bf16 = plan_layer(p, m, pc);
  pc.dtype = DType::fp8;
  const Result<LayerPlan> fp8 = plan_layer(p, m, pc);
  ASSERT_TRUE(bf16.ok()) << bf16.error().message;
  ASSERT_TRUE(fp8.ok()) << fp8.error().message;
  EXPECT_EQ(fp8->other.attention_fwd_s, bf16->other.attention_fwd_s);
  EXPECT_EQ(fp8->other.attention_bwd_s, bf16->other.attention_bwd_s);
  EXPECT_LT(fp8->lm_head_s, bf16->lm_head_s);
  // Context parallelism: the rank's 4096 queries meet 8192 keys, twice the work of a plan of a
  // 4096-token sequence (one launch each).
  pc.dtype = DType::bf16;
  pc.seq = 4096;
  const Result<LayerPlan> share = plan_layer(p, m, pc);
  pc.cp = 2;
  const Result<LayerPlan> cp2 = plan_layer(p, m, pc);
  ASSERT_TRUE(share.ok() && cp2.ok());
  const double launch = p.overheads.kernel_launch_s;
  EXPECT_NEAR(cp2->other.attention_fwd_s - launch, 2 * (share->other.attention_fwd_s - launch),
              1e-12);
  EXPECT_NEAR(bf16->other.attention_fwd_s - launch, 2 * (cp2->other.attention_fwd_s - launch),
              1e-12);
  pc.cp = 0;
  EXPECT_FALSE(plan_layer(p, m, pc).ok());
}

TEST(LayerPlan, WithoutSequenceParallelism) {
  workload::ParallelConfig pc;
  pc.tp = 4;
  pc.seq = 2048;
  pc.sequence_parallel = false;
  const Result<LayerPlan> lp = plan_layer(a6000(), *workload::resolve_model("gpt3-6.7b"), pc);
  ASSERT_TRUE(lp.ok()) << lp.error().message;
  for (const PlannedOp& po : lp->ops) EXPECT_EQ(po.layer_op.op.kind, workload::OpKind::gemm_ar);
  EXPECT_GT(lp->other.plain_gemm_fwd_s, 0);  // column-parallel forwards have no collective
}

TEST(LayerPlan, TeDefaults) {
  workload::OperatorSpec op;
  op.kind = workload::OpKind::ag_gemm;
  op.m = 4096;
  op.tp = 8;
  op.role = "qkv_fprop";
  EXPECT_EQ(te_default_strategy(op).kind, StrategyKind::fuse_ring);
  op.role = "fc2_fprop";
  op.kind = workload::OpKind::gemm_rs;
  EXPECT_EQ(te_default_strategy(op), (schedule::Strategy{StrategyKind::decompose, 4}));
  op.role = "fc1_dgrad";
  EXPECT_EQ(te_default_strategy(op).kind, StrategyKind::sequential);
  // Without sequence parallelism the same roles are GEMM + all-reduce, which Megatron-LM never
  // hands to TE's userbuffers: sequential, as Megatron-LM runs them.
  op.kind = workload::OpKind::gemm_ar;
  for (const char* role : {"proj_fprop", "fc2_fprop", "fc1_dgrad", "qkv_dgrad"}) {
    op.role = role;
    EXPECT_EQ(te_default_strategy(op).kind, StrategyKind::sequential) << role;
  }
  const schedule::CommPlan te = rank_order_plan(schedule::CommPlan{{4, 5, 6, 7}, {0, 1, 3, 2}, {2, 3, 1, 0}, 2});
  EXPECT_EQ(te.ring, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(te.ring2, (std::vector<int>{3, 2, 1, 0}));
  EXPECT_EQ(te.gpus, (std::vector<int>{4, 5, 6, 7}));
}

// Every field of two estimates, bit for bit.
void expect_same(const model::Estimate& a, const model::Estimate& b) {
  EXPECT_EQ(a.strategy, b.strategy);
  for (auto f :
       {&model::Estimate::total_s, &model::Estimate::compute_s, &model::Estimate::exposed_comm_s,
        &model::Estimate::overhead_s, &model::Estimate::interference_s, &model::Estimate::comm_s})
    EXPECT_EQ(std::bit_cast<std::uint64_t>(a.*f), std::bit_cast<std::uint64_t>(b.*f));
  EXPECT_EQ(a.bottleneck, b.bottleneck);
  EXPECT_EQ(a.congested, b.congested);
}

// What `breakdown` gives of the chosen estimate, bit for bit: everything under all; all but
// the split of what is not compute under chosen (model::estimate_without_split); its total and
// compute under compute.
void expect_same_chosen(const model::Estimate& a, const model::Estimate& b,
                        model::Breakdown breakdown) {
  if (breakdown == model::Breakdown::all) return expect_same(a, b);
  EXPECT_EQ(a.strategy, b.strategy);
  for (auto f : {&model::Estimate::total_s, &model::Estimate::compute_s})
    EXPECT_EQ(std::bit_cast<std::uint64_t>(a.*f), std::bit_cast<std::uint64_t>(b.*f));
  if (breakdown != model::Breakdown::chosen) return;
  EXPECT_EQ(std::bit_cast<std::uint64_t>(a.comm_s), std::bit_cast<std::uint64_t>(b.comm_s));
  EXPECT_EQ(a.bottleneck, b.bottleneck);
  EXPECT_EQ(a.congested, b.congested);
}

// Every operator of two plans, `b` planned under `breakdown` and `a` under it or under all:
// the same choice, every estimate's total (under all every estimate in full), what `breakdown`
// gives of the chosen estimate, the reason (unless compute: none), and the megatron and te
// estimates in full, bit for bit.
void expect_same_ops(const LayerPlan& a, const LayerPlan& b, model::Breakdown breakdown) {
  ASSERT_EQ(a.ops.size(), b.ops.size());
  for (std::size_t i = 0; i < a.ops.size(); ++i) {
    SCOPED_TRACE(a.ops[i].choice.op.role);
    const model::OperatorChoice& ca = a.ops[i].choice;
    const model::OperatorChoice& cb = b.ops[i].choice;
    ASSERT_EQ(ca.chosen, cb.chosen);
    if (breakdown == model::Breakdown::compute) {
      EXPECT_TRUE(cb.reason.empty());
    } else {
      EXPECT_EQ(ca.reason, cb.reason);
    }
    ASSERT_EQ(ca.estimates.size(), cb.estimates.size());
    for (std::size_t k = 0; k < ca.estimates.size(); ++k) {
      if (breakdown == model::Breakdown::all) {
        expect_same(ca.estimates[k], cb.estimates[k]);
      } else {
        EXPECT_EQ(std::bit_cast<std::uint64_t>(ca.estimates[k].total_s),
                  std::bit_cast<std::uint64_t>(cb.estimates[k].total_s));
      }
    }
    expect_same_chosen(a.ops[i].compass(), b.ops[i].compass(), breakdown);
    expect_same(a.ops[i].megatron, b.ops[i].megatron);
    expect_same(a.ops[i].te, b.ops[i].te);
  }
}

TEST(LayerPlan, WithoutSequenceParallelismTeDefaultsAreMegatrons) {
  // Megatron-LM refuses --tp-comm-overlap without --sequence-parallel: every TE estimate of a
  // plan without SP is the sequential one, and so is the iteration.
  // TP 8 on a6000x8: the topology-aware ring is not the rank order, and NCCL's is what runs.
  for (int tp : {2, 8}) {
    workload::ParallelConfig pc;
    pc.tp = tp;
    pc.sequence_parallel = false;
    const Result<LayerPlan> lp = plan_layer(a6000(), *workload::resolve_model("llama2-13b"), pc);
    ASSERT_TRUE(lp.ok()) << lp.error().message;
    ASSERT_FALSE(lp->ops.empty());
    for (const PlannedOp& po : lp->ops) {
      EXPECT_EQ(po.te.strategy.kind, StrategyKind::sequential) << po.choice.op.role;
      expect_same(po.te, po.megatron);
    }
    EXPECT_EQ(lp->te.total_s, lp->megatron.total_s);
  }
}

TEST(LayerPlan, TheChosenBreakdownsChangeNoTotalChoiceOrIterationEstimate) {
  // What the job step reads (plan_for): every operator's chosen, megatron and te estimate in
  // full, the other strategies' totals; on two machines, with and without TP and SP.
  for (const char* machine : {"a6000x8", "h100x8"}) {
    const hardware::Profile p = *hardware::make_preset(machine);
    for (int tp : {1, 2, 8})
      for (bool sp : {true, false}) {
        SCOPED_TRACE(fmt::format("{} tp {} sp {}", machine, tp, sp));
        workload::ParallelConfig pc;
        pc.tp = tp;
        pc.seq = 4096;
        pc.sequence_parallel = sp;
        const workload::ModelConfig m = *workload::resolve_model("llama2-13b");
        const Result<LayerPlan> all = plan_layer(p, m, pc);
        ASSERT_TRUE(all.ok());
        for (model::Breakdown breakdown : {model::Breakdown::chosen, model::Breakdown::compute}) {
          const Result<LayerPlan> fewer = plan_layer(p, m, pc, {}, {}, breakdown);
          ASSERT_TRUE(fewer.ok());
          expect_same_ops(*all, *fewer, breakdown);
          for (auto it : {&LayerPlan::megatron, &LayerPlan::te, &LayerPlan::compass}) {
            EXPECT_EQ(((*all).*it).total_s, ((*fewer).*it).total_s);
          }
        }
      }
  }
  // A layer plan without any breakdown cannot price a step: refused.
  workload::ParallelConfig pc;
  pc.tp = 2;
  EXPECT_FALSE(
      plan_layer(a6000(), *workload::resolve_model("llama2-7b"), pc, {}, {}, model::Breakdown::none)
          .ok());
}

TEST(LayerPlan, APlannerKeptAcrossShapesPlansWhatAColdPlanDoes) {
  // One planner through shapes as the layout search meets them (TP sizes up and down, SP on
  // and off, micro-batches, FP8, another TP group, a shape planned twice): every plan the
  // same bits as plan_layer's cold one, under both breakdowns.
  const hardware::Profile p = *hardware::make_preset("h100x8");
  const workload::ModelConfig m = *workload::resolve_model("llama2-13b");
  struct Shape {
    int tp, micro_batch;
    bool sp, fp8;
    std::vector<int> gpus;
  };
  const std::vector<Shape> shapes = {{8, 1, true, false, {}},          {2, 1, true, false, {}},
                                     {8, 2, false, false, {}},         {4, 1, true, true, {}},
                                     {1, 4, false, false, {}},         {8, 1, true, false, {}},
                                     {4, 1, true, false, {4, 5, 6, 7}}};
  for (model::Breakdown breakdown :
       {model::Breakdown::chosen, model::Breakdown::compute, model::Breakdown::all}) {
    LayerPlanner planner(p);
    for (const Shape& s : shapes) {
      SCOPED_TRACE(fmt::format("tp {} mbs {} sp {} fp8 {} gpus {}", s.tp, s.micro_batch, s.sp,
                               s.fp8, s.gpus.size()));
      workload::ParallelConfig pc;
      pc.tp = s.tp;
      pc.seq = 2048;
      pc.micro_batch = s.micro_batch;
      pc.sequence_parallel = s.sp;
      pc.dtype = s.fp8 ? DType::fp8 : DType::bf16;
      const Result<LayerPlan> cold = plan_layer(p, m, pc, s.gpus, {}, breakdown);
      const Result<LayerPlan> warm = planner.plan(m, pc, s.gpus, {}, breakdown);
      ASSERT_TRUE(cold.ok() && warm.ok());
      EXPECT_EQ(cold->plan.ring, warm->plan.ring);
      EXPECT_EQ(cold->plan.gpus, warm->plan.gpus);
      expect_same_ops(*cold, *warm, breakdown);
      for (auto it : {&LayerPlan::megatron, &LayerPlan::te, &LayerPlan::compass})
        EXPECT_EQ(std::bit_cast<std::uint64_t>(((*cold).*it).total_s),
                  std::bit_cast<std::uint64_t>(((*warm).*it).total_s));
      EXPECT_EQ(std::bit_cast<std::uint64_t>(cold->lm_head_s),
                std::bit_cast<std::uint64_t>(warm->lm_head_s));
    }
  }
}

TEST(LayerPlan, ARefinerThatMovesTheChoiceGetsItsBreakdown) {
  // A refiner that picks the sequential strategy: the new choice carries its compute and
  // communication under Breakdown::chosen as under Breakdown::all (and no split of the rest).
  workload::ParallelConfig pc;
  pc.tp = 8;
  pc.seq = 4096;
  const ChoiceRefiner to_sequential = [](model::OperatorChoice& c, const schedule::CommPlan&) {
    for (std::size_t k = 0; k < c.estimates.size(); ++k)
      if (c.estimates[k].strategy.kind == StrategyKind::sequential) c.chosen = k;
    return Status::success();
  };
  const workload::ModelConfig m = *workload::resolve_model("llama2-13b");
  const Result<LayerPlan> all = plan_layer(a6000(), m, pc, {}, to_sequential);
  const Result<LayerPlan> chosen =
      plan_layer(a6000(), m, pc, {}, to_sequential, model::Breakdown::chosen);
  ASSERT_TRUE(all.ok() && chosen.ok());
  for (std::size_t i = 0; i < all->ops.size(); ++i) {
    EXPECT_EQ(chosen->ops[i].compass().strategy.kind, StrategyKind::sequential);
    EXPECT_GT(chosen->ops[i].compass().compute_s, 0);
    EXPECT_GT(chosen->ops[i].compass().comm_s, 0);
    expect_same_chosen(all->ops[i].compass(), chosen->ops[i].compass(), model::Breakdown::chosen);
    EXPECT_EQ(chosen->ops[i].compass().exposed_comm_s + chosen->ops[i].compass().overhead_s +
                  chosen->ops[i].compass().interference_s,
              0.0);
  }
}

TEST(LayerPlan, BadInputIsAnError) {
  workload::ParallelConfig pc;
  pc.tp = 16;
  const Result<LayerPlan> big = plan_layer(a6000(), *workload::resolve_model("llama2-13b"), pc);
  ASSERT_FALSE(big.ok());
  EXPECT_NE(big.error().message.find("tp=16"), std::string::npos);
  pc.tp = 8;
  pc.seq = 4097;
  EXPECT_FALSE(plan_layer(a6000(), *workload::resolve_model("llama2-13b"), pc).ok());
}

TEST(Sweep, PaperGrid) {
  const Result<SweepResult> r = run_sweep(a6000(), workload::paper_grid());
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_EQ(r->rows.size(), 288u);
  int wins = 0;
  for (const auto& [name, n] : r->summary.wins) wins += n;
  EXPECT_EQ(wins, 288);
  for (const SweepRow& row : r->rows) {
    // The tree patterns are candidates for ag_gemm only (their reduce-scatter model is not
    // trusted for choosing).
    double best = row.choice.estimates.front().total_s;
    for (const model::Estimate& e : row.choice.estimates) {
      const bool tree = e.strategy.kind == schedule::StrategyKind::fuse_hier ||
                        e.strategy.kind == schedule::StrategyKind::fuse_synth;
      if (!tree || row.choice.op.kind == workload::OpKind::ag_gemm) best = std::min(best, e.total_s);
    }
    EXPECT_LE(row.choice.choice().total_s, best * (1 + model::kTieTolerance));
    EXPECT_GE(row.worst_d_s, row.choice.odp.t_argmin_s);
  }
  EXPECT_GE(r->summary.choice_over_sequential.min, 1.0);
  EXPECT_GE(r->summary.dstar_over_worst_d.min, 1.0 - 1e-12);
  const std::string csv = sweep_csv(*r);
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 289);
}

TEST(Sweep, DistributionOfValues) {
  const Distribution d = distribution({3, 1, 2, 10});
  EXPECT_EQ(d.count, 4);
  EXPECT_DOUBLE_EQ(d.min, 1);
  EXPECT_DOUBLE_EQ(d.median, 2.5);
  EXPECT_DOUBLE_EQ(d.mean, 4);
  EXPECT_DOUBLE_EQ(d.max, 10);
}

// Without explaining, the rows carry the same times and choices and no reason; the table and
// the CSV (which print no reason) are the same text.
TEST(Sweep, ExplainingAddsTheReasonsAndChangesNothingElse) {
  const hardware::Profile p = a6000();
  const std::vector<workload::GridEntry> grid = workload::paper_grid();
  const Result<SweepResult> plain = run_sweep(p, grid, {}, {}, 2, /*explain=*/false);
  const Result<SweepResult> explained = run_sweep(p, grid, {}, {}, 2, /*explain=*/true);
  ASSERT_TRUE(plain.ok()) << plain.error().message;
  ASSERT_TRUE(explained.ok()) << explained.error().message;
  ASSERT_EQ(plain->rows.size(), explained->rows.size());
  for (std::size_t i = 0; i < plain->rows.size(); ++i) {
    const model::OperatorChoice& a = plain->rows[i].choice;
    const model::OperatorChoice& b = explained->rows[i].choice;
    EXPECT_EQ(a.chosen, b.chosen) << "row " << i;
    ASSERT_EQ(a.estimates.size(), b.estimates.size());
    for (std::size_t k = 0; k < a.estimates.size(); ++k)
      EXPECT_EQ(a.estimates[k].total_s, b.estimates[k].total_s) << "row " << i << " " << k;
    EXPECT_TRUE(a.reason.empty()) << "row " << i;
    EXPECT_FALSE(b.reason.empty()) << "row " << i;
  }
  EXPECT_EQ(sweep_csv(*plain), sweep_csv(*explained));
  EXPECT_EQ(to_json(plain->summary), to_json(explained->summary));
}

// The workers make each TP group's plan when an operator first needs it: a group that cannot
// be planned is the sweep's error (the plan's own), whatever the workers, and a row before it
// that fails to plan is named first.
TEST(Sweep, AGroupThatCannotBePlannedIsTheError) {
  const hardware::Profile p = a6000();
  const std::vector<workload::GridEntry> grid = workload::paper_grid();
  // GPU 1 twice: the tp-2 group is fine, the tp-4 and tp-8 groups are not.
  const std::vector<int> gpus = {0, 1, 1, 2, 3, 4, 5, 6};
  const Result<schedule::CommPlan> bad = schedule::comm_plan_for(p, {0, 1, 1, 2});
  ASSERT_FALSE(bad.ok());
  for (int threads : {1, 2, 4}) {
    const Result<SweepResult> r = run_sweep(p, grid, {}, gpus, threads);
    ASSERT_FALSE(r.ok()) << threads << " threads";
    EXPECT_EQ(r.error().message, bad.error().message) << threads << " threads";
  }
  // The first tp-4 row comes after tp-2 rows; one of them cannot be planned (its rows do not
  // split over tp 2): that row is named.
  std::vector<workload::GridEntry> rows(grid.begin(), grid.begin() + 12);
  std::size_t first_tp4 = rows.size();
  for (std::size_t i = 0; i < rows.size(); ++i)
    if (rows[i].op.tp == 4 && first_tp4 == rows.size()) first_tp4 = i;
  ASSERT_GT(first_tp4, 1u);
  ASSERT_LT(first_tp4, rows.size());
  ASSERT_EQ(rows[first_tp4 - 1].op.tp, 2);
  rows[first_tp4 - 1].op.m = 3;
  for (int threads : {1, 2, 4}) {
    const Result<SweepResult> r = run_sweep(p, rows, {}, gpus, threads);
    ASSERT_FALSE(r.ok()) << threads << " threads";
    EXPECT_EQ(r.error().message.rfind(fmt::format("grid row {} ", first_tp4 - 1), 0), 0u)
        << r.error().message;
  }
}

TEST(Sweep, TpLargerThanTheMachineIsAnError) {
  const Result<hardware::Profile> p = hardware::make_preset("a6000x4");
  ASSERT_TRUE(p.ok());
  const Result<SweepResult> r = run_sweep(*p, workload::paper_grid());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("tp=8"), std::string::npos);
}

// The distinct operators are planned on several workers, each with caches of its own: the rows
// are the same bits whatever the number of workers, and the error names the same row.
TEST(Sweep, RowsDoNotDependOnTheThreads) {
  const hardware::Profile p = a6000();
  const std::vector<workload::GridEntry> grid = workload::paper_grid();
  std::size_t calls = 0, last_done = 0, last_total = 0;
  const Result<SweepResult> one = run_sweep(
      p, grid,
      [&](std::size_t done, std::size_t total) {
        EXPECT_EQ(done, last_done + 1);
        ++calls;
        last_done = done;
        last_total = total;
      },
      {}, 1);
  ASSERT_TRUE(one.ok()) << one.error().message;
  EXPECT_GT(calls, 0u);
  EXPECT_EQ(last_done, last_total);
  EXPECT_LT(last_total, grid.size());  // recurring operators are planned once
  for (int threads : {2, 5}) {
    const Result<SweepResult> many = run_sweep(p, grid, {}, {}, threads);
    ASSERT_TRUE(many.ok()) << many.error().message;
    ASSERT_EQ(many->rows.size(), one->rows.size());
    for (std::size_t i = 0; i < one->rows.size(); ++i) {
      const model::OperatorChoice& a = one->rows[i].choice;
      const model::OperatorChoice& b = many->rows[i].choice;
      EXPECT_EQ(a.chosen, b.chosen) << "row " << i << ", " << threads << " threads";
      EXPECT_EQ(a.reason, b.reason) << "row " << i;
      ASSERT_EQ(a.estimates.size(), b.estimates.size());
      for (std::size_t k = 0; k < a.estimates.size(); ++k) {
        EXPECT_EQ(a.estimates[k].total_s, b.estimates[k].total_s) << "row " << i << " " << k;
        EXPECT_EQ(a.estimates[k].compute_s, b.estimates[k].compute_s) << "row " << i << " " << k;
      }
      EXPECT_EQ(one->rows[i].decompose4_s, many->rows[i].decompose4_s) << "row " << i;
      EXPECT_EQ(one->rows[i].worst_d, many->rows[i].worst_d) << "row " << i;
    }
  }
  // Row 10 cannot be planned (its rows do not split over tp 8) and row 20 asks for more GPUs
  // than the machine has: row 10 is named, whatever the workers.
  std::vector<workload::GridEntry> bad(grid.begin(), grid.begin() + 30);
  bad[10].op.m = 12;
  bad[10].op.tp = 8;
  bad[20].op.tp = 16;
  for (int threads : {1, 4}) {
    const Result<SweepResult> r = run_sweep(p, bad, {}, {}, threads);
    ASSERT_FALSE(r.ok()) << threads << " threads";
    EXPECT_EQ(r.error().message.rfind("grid row 10 ", 0), 0u) << r.error().message;
  }
  bad[10] = grid[10];
  const Result<SweepResult> r = run_sweep(p, bad, {}, {}, 4);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message.rfind("grid row 20 ", 0), 0u) << r.error().message;
}

}  // namespace
}  // namespace compass::plan
