// Structure, errors, validation and JSON of schedules.

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "schedule_cases.hpp"

namespace compass::schedule {
namespace {

using testing::make_op;
using workload::OpKind;

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

Schedule ring_ag(int p) {
  auto r = generate(make_op(OpKind::ag_gemm, 4 * p, 2 * p, 3, p),
                    Strategy{StrategyKind::fuse_ring, 0}, default_comm_plan(p));
  EXPECT_TRUE(r.ok());
  return *r;
}

TEST(Schedule, DefaultPlanIsRankOrderAndReverse) {
  const CommPlan plan = default_comm_plan(4);
  EXPECT_EQ(plan.gpus, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(plan.ring, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(plan.ring2, (std::vector<int>{3, 2, 1, 0}));
}

TEST(Schedule, BareRingAllGatherIsValidAndMovesEveryShardToEveryRank) {
  const int p = 6;
  const Schedule s = ring_allgather(p, 4, 8);
  ASSERT_TRUE(validate(s).ok()) << validate(s).error().message;
  ASSERT_EQ(s.tasks.size(), static_cast<std::size_t>(p * (p - 1)));
  // Every rank's gathered buffer receives each other rank's chunk exactly once.
  std::vector<std::vector<int>> got(p, std::vector<int>(p, 0));
  for (const Task& t : s.tasks) {
    EXPECT_EQ(t.kind, TaskKind::transfer);
    const int dst_rank = s.buffers[t.dst.buffer].rank;
    EXPECT_EQ(dst_rank, (t.resource.rank + 1) % p);
    ++got[dst_rank][t.dst.row / 4];
  }
  for (int r = 0; r < p; ++r) {
    for (int c = 0; c < p; ++c) EXPECT_EQ(got[r][c], c == r ? 0 : 1) << "rank " << r << " chunk " << c;
  }
}

TEST(Schedule, RingAgGemmHasOneTransferPerStepAndOneGemmPerChunk) {
  const Schedule s = ring_ag(4);
  int transfers = 0, gemms = 0;
  for (const Task& t : s.tasks) {
    transfers += t.kind == TaskKind::transfer;
    gemms += t.kind == TaskKind::gemm;
  }
  EXPECT_EQ(transfers, 4 * 3);
  EXPECT_EQ(gemms, 4 * 4);
  EXPECT_EQ(s.copy_engines, 1);
  // Buffers named per rank with roles.
  const int x0 = s.find_buffer(0, "x");
  ASSERT_GE(x0, 0);
  EXPECT_EQ(s.buffers[static_cast<std::size_t>(x0)].role, BufferRole::input);
  EXPECT_EQ(s.buffers[static_cast<std::size_t>(s.find_buffer(3, "y"))].role, BufferRole::output);
  EXPECT_EQ(s.find_buffer(0, "nope"), -1);
  EXPECT_EQ(s.find_buffer(7, "x"), -1);
}

TEST(Schedule, GemmConsumesTheChunkDeliveredByTheTransferItDependsOn) {
  const Schedule s = ring_ag(3);
  for (const Task& t : s.tasks) {
    if (t.kind != TaskKind::gemm || t.step == 0) continue;
    bool found = false;
    for (int d : t.deps) {
      const Task& dep = s.tasks[static_cast<std::size_t>(d)];
      if (dep.kind == TaskKind::transfer && dep.dst == t.src) found = true;
    }
    EXPECT_TRUE(found) << t.name;
  }
}

TEST(Schedule, OwnShardFirstAndAll2allArrivalOrder) {
  const int p = 4;
  auto r = generate(make_op(OpKind::ag_gemm, 8, 4, 3, p), Strategy{StrategyKind::fuse_all2all, 0},
                    default_comm_plan(p));
  ASSERT_TRUE(r.ok());
  for (int rank = 0; rank < p; ++rank) {
    std::vector<int> chunks;
    for (const Task& t : r->tasks)
      if (t.kind == TaskKind::gemm && t.resource.rank == rank) chunks.push_back(t.chunk);
    ASSERT_EQ(chunks.size(), 4u);
    for (int k = 0; k < p; ++k) EXPECT_EQ(chunks[static_cast<std::size_t>(k)], (rank - k + p) % p);
  }
}

TEST(Schedule, GemmRsRingFollowsRingPositions) {
  // Ring 2 -> 0 -> 3 -> 1: at step s the rank at position P computes the chunk of ring[P-s-1].
  const int p = 4;
  CommPlan plan = default_comm_plan(p);
  plan.ring = {2, 0, 3, 1};
  auto r =
      generate(make_op(OpKind::gemm_rs, 8, 3, 4, p), Strategy{StrategyKind::fuse_ring, 0}, plan);
  ASSERT_TRUE(r.ok()) << r.error().message;
  for (const Task& t : r->tasks) {
    if (t.kind != TaskKind::gemm) continue;
    const int pos = static_cast<int>(
        std::find(plan.ring.begin(), plan.ring.end(), t.resource.rank) - plan.ring.begin());
    EXPECT_EQ(t.chunk, plan.ring[static_cast<std::size_t>(((pos - t.step - 1) % p + p) % p)])
        << t.name;
  }
}

TEST(Schedule, DoubleRingUsesTwoEnginesAndHalves) {
  auto r = generate(make_op(OpKind::ag_gemm, 12, 4, 3, 4),
                    Strategy{StrategyKind::fuse_double_ring, 0}, default_comm_plan(4));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->copy_engines, 2);
  std::set<std::int64_t> rows;
  for (const Task& t : r->tasks)
    if (t.kind == TaskKind::transfer) rows.insert(t.src.rows);
  EXPECT_EQ(rows, (std::set<std::int64_t>{1, 2}));  // 3-row shards split 2 + 1
}

TEST(Schedule, SingleRankIsOneGemm) {
  for (auto kind : {OpKind::ag_gemm, OpKind::gemm_rs, OpKind::gemm_ar})
    for (const auto& st : testing::strategies()) {
      if (st.kind == StrategyKind::decompose && st.parts > 1) continue;
      auto r = generate(make_op(kind, 6, 5, 7, 1), st, default_comm_plan(1));
      ASSERT_TRUE(r.ok()) << r.error().message;
      ASSERT_EQ(r->tasks.size(), 1u) << to_string(st);
      EXPECT_EQ(r->tasks[0].kind, TaskKind::gemm);
      EXPECT_TRUE(validate(*r).ok());
    }
}

TEST(Schedule, DecomposeMustDivideTheRowsEachRankOwns) {
  auto r = generate(make_op(OpKind::ag_gemm, 24, 4, 3, 4), Strategy{StrategyKind::decompose, 4},
                    default_comm_plan(4));
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(contains(r.error().message, "decompose:4")) << r.error().message;
  EXPECT_TRUE(contains(r.error().message, "6 rows")) << r.error().message;
  auto rs = generate(make_op(OpKind::gemm_rs, 8, 3, 4, 4), Strategy{StrategyKind::decompose, 3},
                     default_comm_plan(4));
  ASSERT_FALSE(rs.ok());
  EXPECT_TRUE(contains(rs.error().message, "decompose:3"));
  auto ar = generate(make_op(OpKind::gemm_ar, 9, 3, 4, 4), Strategy{StrategyKind::decompose, 2},
                     default_comm_plan(4));
  ASSERT_FALSE(ar.ok());
  EXPECT_TRUE(contains(ar.error().message, "M = 9")) << ar.error().message;
  EXPECT_TRUE(generate(make_op(OpKind::gemm_ar, 9, 3, 4, 4), Strategy{StrategyKind::decompose, 1},
                       default_comm_plan(4))
                  .ok());
}

TEST(Schedule, DecomposeOneIsSequentialTaskForTask) {
  for (auto kind : {OpKind::ag_gemm, OpKind::gemm_rs, OpKind::gemm_ar}) {
    const auto op = make_op(kind, 12, 8, 8, 4);
    auto seq = generate(op, Strategy{StrategyKind::sequential, 0}, default_comm_plan(4));
    auto d1 = generate(op, Strategy{StrategyKind::decompose, 1}, default_comm_plan(4));
    ASSERT_TRUE(seq.ok() && d1.ok());
    EXPECT_EQ(seq->tasks, d1->tasks);
    EXPECT_EQ(seq->buffers, d1->buffers);
  }
}

TEST(Schedule, PlanMustMatchTheOperator) {
  const auto op = make_op(OpKind::ag_gemm, 8, 4, 3, 4);
  auto r = generate(op, Strategy{}, default_comm_plan(3));
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(contains(r.error().message, "tp = 4")) << r.error().message;
  CommPlan bad = default_comm_plan(4);
  bad.ring = {0, 1, 1, 2};
  r = generate(op, Strategy{}, bad);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(contains(r.error().message, "twice")) << r.error().message;
  bad = default_comm_plan(4);
  bad.ring2 = {0, 1, 2, 9};
  r = generate(op, Strategy{}, bad);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(contains(r.error().message, "ring2")) << r.error().message;
  bad = default_comm_plan(4);
  bad.copy_engines = 0;
  EXPECT_FALSE(generate(op, Strategy{}, bad).ok());
}

TEST(Schedule, InvalidOperatorIsAnError) {
  EXPECT_FALSE(
      generate(make_op(OpKind::ag_gemm, 0, 4, 3, 2), Strategy{}, default_comm_plan(2)).ok());
  EXPECT_FALSE(
      generate(make_op(OpKind::ag_gemm, 6, 5, 3, 2), Strategy{}, default_comm_plan(2)).ok());
  EXPECT_FALSE(
      generate(make_op(OpKind::gemm_rs, 6, 5, 3, 2), Strategy{}, default_comm_plan(2)).ok());
  EXPECT_FALSE(
      generate(make_op(OpKind::gemm_ar, 6, 5, 4, 0), Strategy{}, default_comm_plan(0)).ok());
}

TEST(Schedule, ValidateCatchesBrokenGraphs) {
  const Schedule good = ring_ag(2);
  ASSERT_TRUE(validate(good).ok());

  Schedule s = good;
  s.tasks[1].id = 5;
  EXPECT_TRUE(contains(validate(s).error().message, "id is 5"));

  s = good;
  s.tasks[0].deps.push_back(static_cast<int>(s.tasks.size()));
  EXPECT_TRUE(contains(validate(s).error().message, "not a task id"));

  // A cycle through deps: the first task waits for the last.
  s = good;
  s.tasks[0].deps.push_back(static_cast<int>(s.tasks.size()) - 1);
  EXPECT_TRUE(contains(validate(s).error().message, "cycle"));

  // A cycle through resource order: an earlier task on a resource waiting for a later one on
  // the same resource.
  s = good;
  int first = -1, second = -1;
  for (const Task& t : s.tasks)
    if (t.resource.rank == 0 && t.kind == TaskKind::gemm) (first < 0 ? first : second) = t.id;
  ASSERT_GE(second, 0);
  s.tasks[static_cast<std::size_t>(first)].deps.push_back(second);
  EXPECT_TRUE(contains(validate(s).error().message, "cycle"));

  s = good;
  s.tasks[0].src.rows = 1000;
  EXPECT_TRUE(contains(validate(s).error().message, "outside buffer"));

  s = good;
  for (Task& t : s.tasks)
    if (t.kind == TaskKind::transfer) {
      t.resource.kind = ResourceKind::compute;
      t.resource.index = 0;
      break;
    }
  EXPECT_TRUE(contains(validate(s).error().message, "copy engine"));

  s = good;
  for (Task& t : s.tasks)
    if (t.kind == TaskKind::gemm) {
      t.b.cols -= 1;
      break;
    }
  EXPECT_FALSE(validate(s).ok());

  s = good;
  s.tasks[0].resource.index = 3;
  EXPECT_FALSE(validate(s).ok());

  s = good;
  s.buffers.push_back(s.buffers[0]);
  EXPECT_TRUE(contains(validate(s).error().message, "two buffers"));

  s = good;
  s.op.tp = 3;
  EXPECT_FALSE(validate(s).ok());
}

TEST(Schedule, TaskBytesAndFlops) {
  const Schedule s = ring_ag(2);  // M=8, N=4, K=3, bf16
  for (const Task& t : s.tasks) {
    if (t.kind == TaskKind::transfer) {
      EXPECT_EQ(task_bytes(s, t), 4 * 3 * 2);
      EXPECT_EQ(task_flops(t, s), 0.0);
    } else {
      EXPECT_EQ(task_bytes(s, t), 0);
      EXPECT_EQ(task_flops(t, s), 2.0 * 4 * 2 * 3);
    }
  }
}

TEST(ScheduleJson, RoundTripAndReadableNames) {
  auto r = generate(make_op(OpKind::gemm_ar, 10, 3, 4, 4), Strategy{StrategyKind::decompose, 1},
                    default_comm_plan(4));
  ASSERT_TRUE(r.ok());
  const std::string text = schedule_to_json(*r);
  EXPECT_TRUE(contains(text, "\"format\": \"compass-schedule\""));
  EXPECT_TRUE(contains(text, "\"strategy\": \"decompose:1\""));
  EXPECT_TRUE(contains(text, "\"kind\":\"transfer\""));
  auto back = schedule_from_json(text);
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(*back, *r);
  EXPECT_EQ(schedule_to_json(*back), text);
}

TEST(ScheduleJson, FusedGroupsRoundTripAndAreValidated) {
  auto r =
      generate(make_op(OpKind::ag_gemm, 16, 8, 3, 4), Strategy{StrategyKind::fuse_double_ring, 0},
               default_comm_plan(4), GenerateOptions{true});
  ASSERT_TRUE(r.ok()) << r.error().message;
  const std::string text = schedule_to_json(*r);
  EXPECT_TRUE(contains(text, "\"fused\":0"));
  auto back = schedule_from_json(text);
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(*back, *r);
  // Plain schedules do not mention groups at all.
  EXPECT_FALSE(contains(schedule_to_json(ring_ag(2)), "fused"));

  Schedule bad = *r;
  for (Task& t : bad.tasks)
    if (t.kind == TaskKind::transfer) {
      t.fused = 0;
      break;
    }
  auto st = validate(bad);
  ASSERT_FALSE(st.ok());
  EXPECT_TRUE(contains(st.error().message, "only gemm tasks belong to a fused group"));
  bad = *r;
  int seen = 0;
  for (Task& t : bad.tasks)
    if (t.kind == TaskKind::gemm && t.resource.rank == 1 && seen++ == 1)
      t.src.buffer = bad.find_buffer(1, "x"), t.src.row = 0;
  st = validate(bad);
  ASSERT_FALSE(st.ok());
  EXPECT_TRUE(contains(st.error().message, "fused group 0 of rank 1 mixes operands"))
      << st.error().message;
}

TEST(Schedule, FusedGemmOwnChunkIsCopiedFirstAndGroupsFollowArrival) {
  auto r = generate(make_op(OpKind::ag_gemm, 16, 8, 3, 4), Strategy{StrategyKind::fuse_ring, 0},
                    default_comm_plan(4), GenerateOptions{true});
  ASSERT_TRUE(r.ok());
  for (int rank = 0; rank < 4; ++rank) {
    std::vector<const Task*> compute;
    for (const Task& t : r->tasks)
      if (t.resource.rank == rank && t.resource.kind == ResourceKind::compute)
        compute.push_back(&t);
    ASSERT_EQ(compute.size(), 5u);
    EXPECT_EQ(compute[0]->kind, TaskKind::copy);
    EXPECT_EQ(r->buffers[compute[0]->src.buffer].name, "x");
    for (std::size_t i = 1; i < compute.size(); ++i) {
      EXPECT_EQ(compute[i]->kind, TaskKind::gemm);
      EXPECT_EQ(compute[i]->fused, 0);
      // Ring order: own chunk, then the ring predecessors'.
      EXPECT_EQ(compute[i]->chunk, ((rank - static_cast<int>(i) + 1) % 4 + 4) % 4);
    }
    // The own-chunk GEMM reads what the copy wrote.
    EXPECT_NE(std::find(compute[1]->deps.begin(), compute[1]->deps.end(), compute[0]->id),
              compute[1]->deps.end());
  }
}

// GEMM-RS with fused groups: each rank computes its partials in ring order (own chunk last)
// into "part" as group 0, stores each peer chunk into the owner's slot for the sender, and the
// owner sums slot 0, 1, ..., p-1 (its own partial from "part") on its compute resource.
TEST(Schedule, FusedGemmRsStoresIntoOwnerSlotsAndSumsInRankOrder) {
  const int p = 4;
  auto r = generate(make_op(OpKind::gemm_rs, 16, 8, 4, p), Strategy{StrategyKind::fuse_ring, 0},
                    default_comm_plan(p), GenerateOptions{true});
  ASSERT_TRUE(r.ok()) << r.error().message;
  auto name = [&](const Region& g) { return r->buffers[static_cast<std::size_t>(g.buffer)].name; };
  for (int rank = 0; rank < p; ++rank) {
    std::vector<const Task*> compute;
    for (const Task& t : r->tasks)
      if (t.resource.rank == rank && t.resource.kind == ResourceKind::compute)
        compute.push_back(&t);
    ASSERT_EQ(compute.size(), static_cast<std::size_t>(2 * p));
    for (int i = 0; i < p; ++i) {
      const Task& g = *compute[static_cast<std::size_t>(i)];
      EXPECT_EQ(g.kind, TaskKind::gemm);
      EXPECT_EQ(g.fused, 0);
      EXPECT_EQ(name(g.dst), "part");
      EXPECT_EQ(g.chunk, ((rank - i - 1) % p + p) % p) << g.name;  // ring order, own last
    }
    for (int i = 0; i < p; ++i) {
      const Task& a = *compute[static_cast<std::size_t>(p + i)];
      EXPECT_EQ(a.kind, i == 0 ? TaskKind::copy : TaskKind::add) << a.name;
      EXPECT_EQ(name(a.dst), "y");
      EXPECT_EQ(name(a.src), i == rank ? "part" : "recv") << a.name;
      if (i != rank) {
        EXPECT_EQ(a.src.row, i * 4) << a.name;  // the slot of sender i
      }
    }
  }
  int stores = 0;
  for (const Task& t : r->tasks)
    if (t.kind == TaskKind::transfer) {
      ++stores;
      EXPECT_EQ(name(t.src), "part");
      EXPECT_EQ(name(t.dst), "recv");
      EXPECT_EQ(r->owner(t.dst), t.chunk) << t.name;
      EXPECT_EQ(t.dst.row, r->owner(t.src) * 4) << t.name;
    }
  EXPECT_EQ(stores, p * (p - 1));
  // The tree patterns have no groups.
  auto hier = generate(make_op(OpKind::gemm_rs, 16, 8, 4, p), Strategy{StrategyKind::fuse_hier, 0},
                       default_comm_plan(p), GenerateOptions{true});
  ASSERT_TRUE(hier.ok());
  for (const Task& t : hier->tasks) EXPECT_EQ(t.fused, -1);
}

TEST(ScheduleJson, ErrorsNameTheField) {
  EXPECT_EQ(
      schedule_from_json("{").error().message.rfind("schedule JSON: line 1: malformed JSON: ", 0),
      0u);
  EXPECT_TRUE(contains(schedule_from_json("[]").error().message, "top level"));
  const std::string good = schedule_to_json(ring_ag(2));
  std::string bad = good;
  bad.replace(bad.find("\"compass-schedule\""), 18, "\"other\"");
  EXPECT_TRUE(contains(schedule_from_json(bad).error().message, "format"));
  bad = good;
  bad.replace(bad.find("\"kind\":\"transfer\""), 17, "\"kind\":\"teleport\"");
  EXPECT_TRUE(contains(schedule_from_json(bad).error().message, "tasks[0].kind"))
      << schedule_from_json(bad).error().message;
  bad = good;
  bad.replace(bad.find("\"rows\":"), 7, "\"rowz\":");
  EXPECT_TRUE(contains(schedule_from_json(bad).error().message, "rows"))
      << schedule_from_json(bad).error().message;
  bad = good;
  bad.replace(bad.find("\"strategy\": \"fuse:ring\""), 23, "\"strategy\": \"fuse:star\"");
  EXPECT_TRUE(contains(schedule_from_json(bad).error().message, "fuse:star"));
  // Structurally invalid graphs are rejected by validate().
  bad = good;
  bad.replace(bad.find("\"deps\":[]"), 9, "\"deps\":[99]");
  EXPECT_TRUE(contains(schedule_from_json(bad).error().message, "not a task id"))
      << schedule_from_json(bad).error().message;
}

}  // namespace
}  // namespace compass::schedule
