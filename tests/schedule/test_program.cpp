// One program per fused strategy (schedule/program.hpp): the schedule the generator builds is
// that program, read back task by task (program_of), with every dependency of the schedule
// either one of the program's waits or implied by them and the streams' orders.

#include <gtest/gtest.h>

#include <numeric>

#include "compass/hardware/presets.hpp"
#include "compass/schedule/program.hpp"
#include "schedule_cases.hpp"

namespace compass::schedule {
namespace {

using workload::OpKind;

// Whether every step of `pr` moves or computes at least one row (the generator skips tasks that
// touch no element, so a program with empty steps has no task for them).
bool all_rows(const Program& pr) {
  for (const auto& items : pr.items)
    for (const Program::Item& it : items)
      if (it.rows <= 0) return false;
  for (const Program::Send& sd : pr.sends)
    if (sd.rows <= 0) return false;
  return true;
}

// program_of(generate(op, st, plan, costs)) == program(op, st, plan, costs); returns false when
// the case is left out: a program with empty steps (the generator emits no task for them).
bool expect_schedule_is_program(const workload::OperatorSpec& op, const Strategy& st,
                                const CommPlan& plan, const std::string& where,
                                const TreeRsCosts& costs = {}) {
  const Program want = program(op, st, plan, costs);
  if (!all_rows(want)) return false;
  GenerateOptions options;
  options.tree_rs_costs = costs;
  auto s = generate(op, st, plan, options);
  EXPECT_TRUE(s.ok()) << where << ": " << s.error().message;
  if (!s.ok()) return true;
  auto got = program_of(*s);
  EXPECT_TRUE(got.ok()) << where << ": " << got.error().message;
  if (!got.ok()) return true;
  EXPECT_EQ(got->items.size(), want.items.size()) << where;
  for (std::size_t v = 0; v < std::min(got->items.size(), want.items.size()); ++v) {
    EXPECT_EQ(got->items[v].size(), want.items[v].size()) << where << " rank " << v;
    for (std::size_t i = 0; i < std::min(got->items[v].size(), want.items[v].size()); ++i) {
      const Program::Item &a = got->items[v][i], &b = want.items[v][i];
      EXPECT_TRUE(a == b) << where << " rank " << v << " item " << i << ": read back (add " << a.add
                          << ", rows " << a.rows << ", flow_in " << a.flow_in << "), program (add "
                          << b.add << ", rows " << b.rows << ", flow_in " << b.flow_in << ")";
    }
  }
  EXPECT_EQ(got->sends.size(), want.sends.size()) << where;
  for (std::size_t f = 0; f < std::min(got->sends.size(), want.sends.size()); ++f) {
    const Program::Send &a = got->sends[f], &b = want.sends[f];
    auto show = [](const Program::Send& x) {
      return fmt::format("{}->{} after {} ready_item {} dep_flow {} rows {}", x.from, x.to, x.after,
                         x.ready_item, x.dep_flow, x.rows);
    };
    EXPECT_TRUE(a == b) << where << " send " << f << ": read back " << show(a) << ", program "
                        << show(b);
  }
  return true;
}

TEST(Program, EveryFusedScheduleIsItsProgramOnTheCaseGrid) {
  int checked = 0, total = 0;
  testing::for_each_shape_and_plan([&](const workload::OperatorSpec& op,
                                       const std::string& name, const CommPlan& plan) {
    for (const Strategy& st : testing::strategies()) {
      if (!has_program(st.kind)) continue;
      ++total;
      const testing::Case c{op, st, nullptr, name};
      checked +=
          expect_schedule_is_program(op, st, plan, c.label(),
                                     testing::grid_options(name, plan, op).tree_rs_costs)
              ? 1
              : 0;
    }
  });
  // Most cases have no empty step; the others (one-row shards split in halves, fewer rows than
  // ranks) are left out. Unequal chunks (gemm_ar, M not a multiple of p) are in.
  EXPECT_GT(checked, total / 2) << checked << " of " << total;
  int uneven = 0;
  for (int p : {2, 3, 4, 8})
    for (const workload::OperatorSpec& op : testing::shapes(OpKind::gemm_ar, p))
      for (const Strategy& st : testing::strategies())
        if (has_program(st.kind) && op.m % p != 0 && op.m >= 2 * p)
          uneven += expect_schedule_is_program(op, st, default_comm_plan(p), "uneven") ? 1 : 0;
  EXPECT_GT(uneven, 0);
}

TEST(Program, EveryFusedScheduleIsItsProgramOnThePresets) {
  for (const std::string& name : hardware::preset_names()) {
    const hardware::Profile prof = *hardware::make_preset(name);
    for (int p : {2, 4, 8}) {
      if (p > prof.gpu_count()) continue;
      std::vector<int> gpus(static_cast<std::size_t>(p));
      std::iota(gpus.begin(), gpus.end(), 0);
      auto plan = comm_plan_for(prof, gpus);
      ASSERT_TRUE(plan.ok()) << name << ": " << plan.error().message;
      for (CommPlan pl : {*plan, [&] {
                            CommPlan one = *plan;
                            one.copy_engines = 1;
                            return one;
                          }()})
        for (OpKind kind : {OpKind::ag_gemm, OpKind::gemm_rs, OpKind::gemm_ar})
          for (const Strategy& st : all_strategies(4)) {
            if (!has_program(st.kind)) continue;
            const workload::OperatorSpec op = testing::make_op(kind, 4096, 8192, 8192, p);
            const std::string where = fmt::format("{} engines={} {}", name, pl.copy_engines,
                                                  testing::Case{op, st, nullptr, name}.label());
            EXPECT_TRUE(
                expect_schedule_is_program(op, st, pl, where, tree_rs_costs(prof, pl, op)))
                << where;
          }
    }
  }
}

// The layout the rings and the all-to-all are lowered from: the same program as program(), a
// tag for every step, every step emitted once and after everything it waits for, and the
// generated schedule's tasks, in order, are the layout's non-empty steps with its labels.
TEST(Program, TheRingsAndTheAll2allAreLoweredFromTheirLayout) {
  int checked = 0;
  for (int p : {1, 2, 3, 4, 8})
    for (OpKind kind : {OpKind::ag_gemm, OpKind::gemm_rs, OpKind::gemm_ar})
      for (const workload::OperatorSpec& op : testing::shapes(kind, p))
        for (const auto& [name, plan] : testing::plans(p))
          for (StrategyKind sk : {StrategyKind::fuse_all2all, StrategyKind::fuse_ring,
                                  StrategyKind::fuse_double_ring}) {
            const Strategy st{sk, 0};
            const std::string where = testing::Case{op, st, nullptr, name}.label();
            const LaidOutProgram lp = laid_out_program(op, st, plan);
            const Program& pr = lp.program;
            const ProgramLayout& lay = lp.layout;
            EXPECT_TRUE(pr == program(op, st, plan)) << where;
            ASSERT_EQ(lay.items.size(), pr.items.size()) << where;
            for (std::size_t v = 0; v < pr.items.size(); ++v)
              ASSERT_EQ(lay.items[v].size(), pr.items[v].size()) << where;
            ASSERT_EQ(lay.sends.size(), pr.sends.size()) << where;
            // Emitted once each, after what it waits for.
            std::vector<std::vector<int>> item_at(pr.items.size());
            for (std::size_t v = 0; v < pr.items.size(); ++v) item_at[v].assign(pr.items[v].size(), -1);
            std::vector<int> send_at(pr.sends.size(), -1);
            for (std::size_t i = 0; i < lay.order.size(); ++i) {
              const ProgramLayout::Ref& r = lay.order[i];
              int& at = r.rank < 0 ? send_at.at(r.index) : item_at.at(r.rank).at(r.index);
              EXPECT_EQ(at, -1) << where << ": step emitted twice";
              at = static_cast<int>(i);
            }
            for (std::size_t v = 0; v < pr.items.size(); ++v)
              for (std::size_t i = 0; i < pr.items[v].size(); ++i) {
                const int at = item_at[v][i];
                EXPECT_GE(at, 0) << where << ": rank " << v << " item " << i << " never emitted";
                if (i > 0) {
                  EXPECT_GT(at, item_at[v][i - 1]) << where;
                }
                if (pr.items[v][i].flow_in >= 0) {
                  EXPECT_GT(at, send_at[pr.items[v][i].flow_in]) << where;
                }
              }
            for (std::size_t f = 0; f < pr.sends.size(); ++f) {
              const Program::Send& sd = pr.sends[f];
              const ProgramLayout::Tag& t = lay.sends[f];
              EXPECT_GE(send_at[f], 0) << where << ": send " << f << " never emitted";
              if (sd.after >= 0) {
                EXPECT_GT(send_at[f], send_at[sd.after]) << where;
              }
              if (sd.dep_flow >= 0) {
                EXPECT_GT(send_at[f], send_at[sd.dep_flow]) << where;
              }
              if (sd.ready_item >= 0) {
                EXPECT_GT(send_at[f], item_at[sd.from][sd.ready_item]) << where;
              }
              EXPECT_TRUE(t.engine >= 0 && t.engine < plan.copy_engines) << where;
              EXPECT_TRUE(!t.output || kind == OpKind::gemm_ar) << where;
              // A transfer carries the rows of the chunk its data came with: the transfer that
              // brought it, the item that completed it, or else the sender's own.
              const int from_chunk = sd.dep_flow >= 0     ? lay.sends[sd.dep_flow].chunk
                                     : sd.ready_item >= 0 ? lay.items[sd.from][sd.ready_item].chunk
                                                          : sd.from;
              EXPECT_EQ(t.chunk, from_chunk) << where << ": send " << f;
            }
            // An item computes on the chunk that arrived for it, or with nothing to wait for,
            // first, on the rank's own shard (AG-GEMM).
            for (std::size_t v = 0; v < pr.items.size(); ++v)
              for (std::size_t i = 0; i < pr.items[v].size(); ++i) {
                const Program::Item& it = pr.items[v][i];
                const int chunk = lay.items[v][i].chunk;
                if (it.flow_in >= 0) {
                  EXPECT_EQ(chunk, lay.sends[it.flow_in].chunk) << where << " rank " << v;
                } else if (kind == OpKind::ag_gemm && i == 0) {
                  EXPECT_EQ(chunk, static_cast<int>(v)) << where;
                }
              }
            // The schedule's tasks are the non-empty steps in layout order, each on its rank's
            // compute stream or its sender's engine.
            auto s = generate(op, st, plan);
            ASSERT_TRUE(s.ok()) << where << ": " << s.error().message;
            std::size_t task = 0;
            for (const ProgramLayout::Ref& r : lay.order) {
              const bool send = r.rank < 0;
              const std::int64_t rows =
                  send ? pr.sends[r.index].rows : pr.items[r.rank][r.index].rows;
              if (rows <= 0) continue;
              ASSERT_LT(task, s->tasks.size()) << where;
              const Task& tk = s->tasks[task++];
              EXPECT_EQ(tk.kind == TaskKind::transfer, send) << where << " " << tk.name;
              EXPECT_EQ(tk.resource.rank, send ? pr.sends[r.index].from : r.rank)
                  << where << " " << tk.name;
              if (!send) {
                EXPECT_EQ(tk.kind == TaskKind::add, pr.items[r.rank][r.index].add)
                    << where << " " << tk.name;
              }
            }
            EXPECT_EQ(task, s->tasks.size()) << where;
            ++checked;
          }
  EXPECT_GT(checked, 300);
}

TEST(Program, SchedulesThatAreNotOneProgramAreRefused) {
  const CommPlan plan = default_comm_plan(4);
  const workload::OperatorSpec op = testing::make_op(OpKind::gemm_rs, 64, 32, 64, 4);
  // NCCL-style collectives beside separate GEMM kernels.
  auto seq = generate(op, Strategy{StrategyKind::sequential, 0}, plan);
  ASSERT_TRUE(seq.ok());
  EXPECT_FALSE(program_of(*seq).ok());
  // The fused GEMM-RS kernel's form sums the partials with a copy and adds in rank order.
  auto fused = generate(op, Strategy{StrategyKind::fuse_ring, 0}, plan, GenerateOptions{true});
  ASSERT_TRUE(fused.ok());
  EXPECT_FALSE(program_of(*fused).ok());
  // Dependencies beyond the program's waits: implied ones are accepted, others refused.
  auto ring = generate(op, Strategy{StrategyKind::fuse_ring, 0}, plan);
  ASSERT_TRUE(ring.ok());
  ASSERT_TRUE(program_of(*ring).ok());
  auto find = [&](TaskKind kind, int rank, int nth) {
    for (const Task& t : ring->tasks)
      if (t.kind == kind && t.resource.rank == rank && nth-- == 0) return t.id;
    return -1;
  };
  const int gemm0 = find(TaskKind::gemm, 0, 0), gemm1 = find(TaskKind::gemm, 1, 0);
  const int add1 = find(TaskKind::add, 1, 0);
  ASSERT_GE(gemm0, 0);
  ASSERT_GT(gemm1, gemm0);
  ASSERT_GT(add1, gemm0);
  // Rank 1's first add sums what rank 0 sent after its first GEMM (ring 0 -> 1): implied.
  Schedule implied = *ring;
  implied.tasks[static_cast<std::size_t>(add1)].deps.push_back(gemm0);
  EXPECT_TRUE(program_of(implied).ok());
  // Rank 1's first GEMM waits for nothing in the program: waiting for rank 0's is not implied.
  Schedule extra = *ring;
  extra.tasks[static_cast<std::size_t>(gemm1)].deps.push_back(gemm0);
  EXPECT_FALSE(program_of(extra).ok());
}

}  // namespace
}  // namespace compass::schedule
