// The program of sequential and decompose:d (schedule/collective_program.hpp): the schedule the
// generator builds is its lowering, step by step in emitted order, and every step's waits are
// dependencies of its task; the follow order visits every step once, after what it waits for
// and after the step before it on its resource.

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <utility>

#include "compass/schedule/collective_program.hpp"
#include "schedule_cases.hpp"

namespace compass::schedule {
namespace {

using workload::OpKind;
using Role = CollectiveProgram::Role;

// What a step's tasks must be: kind and resource.
TaskKind kind_of(Role r) {
  switch (r) {
    case Role::gemm:
      return TaskKind::gemm;
    case Role::send:
      return TaskKind::transfer;
    case Role::add:
      return TaskKind::add;
    default:
      return TaskKind::copy;
  }
}

// Checks one case; returns the number of steps checked.
int expect_lowered(const workload::OperatorSpec& op, const Strategy& st, const CommPlan& plan,
                   const std::string& where) {
  auto s = generate(op, st, plan);
  if (!s.ok()) return 0;  // a degree that does not divide the rows
  const CollectiveProgram pr = collective_program(op, st, plan);
  std::vector<int> pos(static_cast<std::size_t>(op.tp));
  for (int i = 0; i < op.tp; ++i) pos[static_cast<std::size_t>(plan.ring[i])] = i;
  // Emitted order: step k's tasks are the next tasks() of the schedule.
  std::vector<int> first(pr.steps.size(), -1), last(pr.steps.size(), -1);
  std::size_t id = 0;
  for (std::size_t k = 0; k < pr.steps.size(); ++k) {
    const CollectiveProgram::Step& step = pr.steps[k];
    for (int j = 0; j < step.tasks(); ++j, ++id) {
      if (id >= s->tasks.size()) {
        ADD_FAILURE() << where << ": the program has more tasks than the schedule's "
                      << s->tasks.size();
        return 0;
      }
      const Task& t = s->tasks[id];
      if (j == 0) first[k] = static_cast<int>(id);
      last[k] = static_cast<int>(id);
      EXPECT_EQ(t.kind, kind_of(step.role)) << where << " step " << k << ": " << task_label(t);
      EXPECT_EQ(t.resource.rank, step.rank) << where << " step " << k << ": " << task_label(t);
      EXPECT_EQ(t.resource.kind, CollectiveProgram::on_copy_engine(step.role)
                                     ? ResourceKind::copy_engine
                                     : ResourceKind::compute)
          << where << " step " << k << ": " << task_label(t);
      EXPECT_EQ(t.chunk, step.part) << where << " step " << k << ": " << task_label(t);
      if (step.role == Role::send) {
        EXPECT_EQ(s->owner(t.dst), plan.ring[(pos[step.rank] + 1) % op.tp]) << where;
        EXPECT_EQ(t.step, step.ring_step) << where << ": " << task_label(t);
        EXPECT_EQ(t.src.rows, step.rows) << where << ": " << task_label(t);
      }
    }
  }
  EXPECT_EQ(id, s->tasks.size()) << where;
  // Every wait is a dependency of the step's task.
  for (std::size_t k = 0; k < pr.steps.size(); ++k)
    for (int w : pr.steps[k].waits) {
      if (w < 0 || first[k] < 0 || last[w] < 0) continue;
      const std::vector<int>& deps = s->tasks[first[k]].deps;
      EXPECT_NE(std::find(deps.begin(), deps.end(), last[w]), deps.end())
          << where << ": " << task_label(s->tasks[first[k]]) << " waits for "
          << task_label(s->tasks[last[w]]);
    }
  // The follow order: a permutation, every step after its waits and after the previous step
  // on its resource.
  std::vector<int> at(pr.steps.size(), -1);
  for (std::size_t n = 0; n < pr.follow.size(); ++n) {
    const int k = pr.follow[n];
    EXPECT_EQ(at[k], -1) << where << ": step " << k << " followed twice";
    at[k] = static_cast<int>(n);
  }
  EXPECT_EQ(pr.follow.size(), pr.steps.size()) << where;
  std::map<std::pair<int, bool>, int> prev;  // (rank, copy engine) -> last step emitted
  for (std::size_t k = 0; k < pr.steps.size(); ++k) {
    const CollectiveProgram::Step& step = pr.steps[k];
    for (int w : step.waits) {
      if (w >= 0) {
        EXPECT_LT(at[w], at[k]) << where << ": step " << k << " before its wait " << w;
      }
    }
    const auto key = std::make_pair(step.rank, CollectiveProgram::on_copy_engine(step.role));
    if (auto p = prev.find(key); p != prev.end()) {
      EXPECT_LT(at[p->second], at[k]) << where << ": step " << k << " out of resource order";
    }
    prev[key] = static_cast<int>(k);
  }
  return static_cast<int>(pr.steps.size());
}

TEST(CollectiveProgram, SequentialAndDecomposeAreLoweredFromTheirProgram) {
  int checked = 0;
  testing::for_each_shape_and_plan([&](const workload::OperatorSpec& op,
                                       const std::string& name, const CommPlan& plan) {
    for (const Strategy& st : testing::strategies())
      if (st.kind == StrategyKind::sequential || st.kind == StrategyKind::decompose)
        checked += expect_lowered(op, st, plan, testing::Case{op, st, nullptr, name}.label());
  });
  // Larger shapes: staged parts (d > 1) at every p.
  for (int p : {2, 4, 8})
    for (OpKind kind : {OpKind::ag_gemm, OpKind::gemm_rs, OpKind::gemm_ar})
      for (int d : {1, 2, 4}) {
        const workload::OperatorSpec op = testing::make_op(kind, 64 * p, 16 * p, 16 * p, p);
        const Strategy st{StrategyKind::decompose, d};
        checked += expect_lowered(op, st, testing::plans(p).back().second,
                                  testing::Case{op, st, nullptr, "large"}.label());
      }
  EXPECT_GT(checked, 1000);
}

// The follow order moves only what the model's rule needs: AG-GEMM's collectives ahead of its
// GEMMs, and a GEMM-RS part's step-0 sends ahead of the next part's GEMMs.
TEST(CollectiveProgram, TheFollowOrderRunsTheCollectivesAheadOfTheGemmsBesideThem) {
  const CommPlan plan = default_comm_plan(4);
  const CollectiveProgram ag = collective_program(testing::make_op(OpKind::ag_gemm, 64, 16, 16, 4),
                                                  Strategy{StrategyKind::decompose, 2}, plan);
  bool gemm_seen = false;
  for (int k : ag.follow) {
    const bool engine = CollectiveProgram::on_copy_engine(ag.steps[k].role);
    EXPECT_FALSE(engine && gemm_seen) << "step " << k << " follows a GEMM";
    gemm_seen = gemm_seen || !engine;
  }
  const CollectiveProgram rs = collective_program(testing::make_op(OpKind::gemm_rs, 64, 16, 16, 4),
                                                  Strategy{StrategyKind::decompose, 2}, plan);
  // Followed: part 0's GEMMs, part 0's step-0 sends, then part 1's GEMMs (emitted before them).
  std::vector<std::pair<Role, int>> head;
  for (int k : rs.follow) {
    const CollectiveProgram::Step& st = rs.steps[k];
    if (st.role == Role::gemm || (st.role == Role::send && st.ring_step == 0 && st.part == 0))
      head.emplace_back(st.role, st.part);
    if (head.size() == 12) break;
  }
  ASSERT_EQ(head.size(), 12u);
  for (int i = 0; i < 12; ++i) {
    const std::pair<Role, int> want =
        i < 4 ? std::make_pair(Role::gemm, 0)
              : (i < 8 ? std::make_pair(Role::send, 0) : std::make_pair(Role::gemm, 1));
    EXPECT_EQ(head[i], want) << i;
  }
  // In the emitted order part 1's GEMMs come before part 0's sends.
  int first_send = -1, first_gemm1 = -1;
  for (int k = 0; k < static_cast<int>(rs.steps.size()); ++k) {
    if (rs.steps[k].role == Role::send && first_send < 0) first_send = k;
    if (rs.steps[k].role == Role::gemm && rs.steps[k].part == 1 && first_gemm1 < 0) first_gemm1 = k;
  }
  EXPECT_LT(first_gemm1, first_send);
}

}  // namespace
}  // namespace compass::schedule
