// The schedule-to-stream mapping of the CUDA executor (runs without a GPU).
#include "compass/backends/cuda/stream_plan.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "compass/schedule/generate.hpp"

namespace compass::backends::cuda {
namespace {

using schedule::Buffer;
using schedule::BufferRole;
using schedule::Region;
using schedule::Resource;
using schedule::ResourceKind;
using schedule::Schedule;
using schedule::Task;
using schedule::TaskKind;

// A schedule skeleton: p ranks on GPUs `gpus`, one 4x4 scratch buffer per rank.
Schedule skeleton(std::vector<int> gpus) {
  Schedule s;
  s.op.kind = workload::OpKind::ag_gemm;
  s.op.m = s.op.n = s.op.k = 4;
  s.op.tp = static_cast<int>(gpus.size());
  s.gpus = std::move(gpus);
  for (int r = 0; r < s.ranks(); ++r) s.buffers.push_back({"buf", r, 4, 4, BufferRole::scratch});
  return s;
}

int add_task(Schedule& s, TaskKind kind, Resource res, std::vector<int> deps,
             const std::string& name = "") {
  Task t;
  t.id = static_cast<int>(s.tasks.size());
  t.kind = kind;
  t.resource = res;
  t.deps = std::move(deps);
  t.src = t.dst = t.b = Region{res.rank, 0, 4, 0, 4};
  t.name = name;
  s.tasks.push_back(t);
  return t.id;
}

const Resource compute0{0, ResourceKind::compute, 0};
const Resource copy0{0, ResourceKind::copy_engine, 0};
const Resource copy0b{0, ResourceKind::copy_engine, 1};
const Resource compute1{1, ResourceKind::compute, 0};

const TaskIssue& issue_of(const StreamPlan& p, int task) {
  for (const TaskIssue& is : p.issues) {
    if (is.task == task) return is;
  }
  ADD_FAILURE() << "task " << task << " not issued";
  return p.issues.front();
}

TEST(StreamPlan, OneStreamPerRankResourceWithPriorities) {
  Schedule s = skeleton({0, 1});
  add_task(s, TaskKind::gemm, compute0, {});
  add_task(s, TaskKind::transfer, copy0, {0});
  add_task(s, TaskKind::transfer, copy0b, {0});
  add_task(s, TaskKind::add, compute1, {1, 2});
  add_task(s, TaskKind::gemm, compute0, {});
  auto plan = make_stream_plan(s, LaunchMode::virtual_ranks);
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  ASSERT_EQ(plan->streams.size(), 4u);
  EXPECT_EQ(plan->streams[0], (StreamSpec{0, ResourceKind::compute, 0, 0, false}));
  EXPECT_EQ(plan->streams[1], (StreamSpec{0, ResourceKind::copy_engine, 0, 0, true}));
  EXPECT_EQ(plan->streams[2], (StreamSpec{0, ResourceKind::copy_engine, 1, 0, true}));
  EXPECT_EQ(plan->streams[3], (StreamSpec{1, ResourceKind::compute, 0, 0, false}));
  EXPECT_EQ(issue_of(*plan, 4).stream, 0);  // same resource, same stream
  EXPECT_EQ(plan->devices, std::vector<int>{0});
}

TEST(StreamPlan, CrossStreamDepsBecomeEventsSameStreamDepsDoNot) {
  Schedule s = skeleton({0, 1});
  add_task(s, TaskKind::gemm, compute0, {});        // 0
  add_task(s, TaskKind::gemm, compute0, {0});       // 1: same stream, no event
  add_task(s, TaskKind::transfer, copy0, {1});      // 2: waits on 1
  add_task(s, TaskKind::add, compute1, {2});        // 3: waits on 2 (cross rank)
  auto plan = make_stream_plan(s, LaunchMode::virtual_ranks);
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  EXPECT_EQ(plan->event_task, (std::vector<int>{1, 2}));
  EXPECT_EQ(issue_of(*plan, 0).record_event, -1);
  EXPECT_TRUE(issue_of(*plan, 1).wait_events.empty());
  EXPECT_EQ(issue_of(*plan, 1).record_event, 0);
  EXPECT_EQ(issue_of(*plan, 2).wait_events, std::vector<int>{0});
  EXPECT_EQ(issue_of(*plan, 2).record_event, 1);
  EXPECT_EQ(issue_of(*plan, 3).wait_events, std::vector<int>{1});
}

TEST(StreamPlan, WaitsOnlyOnTheLastProducerOfAStream) {
  Schedule s = skeleton({0, 1});
  add_task(s, TaskKind::transfer, copy0, {});       // 0
  add_task(s, TaskKind::transfer, copy0, {});       // 1
  add_task(s, TaskKind::gemm, compute0, {0, 1});    // 2: one wait, on 1
  auto plan = make_stream_plan(s, LaunchMode::virtual_ranks);
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  EXPECT_EQ(plan->event_task, std::vector<int>{1});
  EXPECT_EQ(issue_of(*plan, 2).wait_events, std::vector<int>{0});
}

TEST(StreamPlan, IssueOrderRecordsEventsBeforeTheyAreWaitedOn) {
  Schedule s = skeleton({0, 1});
  add_task(s, TaskKind::gemm, compute0, {2});       // 0 depends on a task listed later
  add_task(s, TaskKind::gemm, compute1, {});        // 1
  add_task(s, TaskKind::transfer, copy0, {});       // 2
  auto plan = make_stream_plan(s, LaunchMode::virtual_ranks);
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  std::vector<int> order;
  for (const TaskIssue& is : plan->issues) order.push_back(is.task);
  EXPECT_EQ(order, (std::vector<int>{1, 2, 0}));
  // Every waited event is recorded by an earlier issue.
  std::vector<bool> recorded(plan->event_task.size(), false);
  for (const TaskIssue& is : plan->issues) {
    for (int e : is.wait_events) EXPECT_TRUE(recorded[e]);
    if (is.record_event >= 0) recorded[is.record_event] = true;
  }
}

TEST(StreamPlan, KeepsEachResourceInListOrder) {
  Schedule s = skeleton({0, 1});
  add_task(s, TaskKind::gemm, compute0, {2});       // 0 waits on rank 1's task 2
  add_task(s, TaskKind::gemm, compute0, {});        // 1 ready, but listed after 0 on compute0
  add_task(s, TaskKind::gemm, compute1, {});        // 2
  auto plan = make_stream_plan(s, LaunchMode::virtual_ranks);
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  std::vector<int> order;
  for (const TaskIssue& is : plan->issues) order.push_back(is.task);
  EXPECT_EQ(order, (std::vector<int>{2, 0, 1}));
}

TEST(StreamPlan, DependencyOnALaterTaskOfTheSameResourceIsADeadlock) {
  Schedule s = skeleton({0, 1});
  add_task(s, TaskKind::gemm, compute0, {1}, "first");
  add_task(s, TaskKind::gemm, compute0, {}, "second");
  auto plan = make_stream_plan(s, LaunchMode::virtual_ranks);
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.error().message.find("task 0 ('first')"), std::string::npos) << plan.error().message;
  EXPECT_NE(plan.error().message.find("task 1 ('second')"), std::string::npos);
  EXPECT_NE(plan.error().message.find("deadlock"), std::string::npos);
}

TEST(StreamPlan, CycleThroughResourceOrderIsADeadlock) {
  Schedule s = skeleton({0, 1});
  // No cycle in the deps alone (0 -> 3, 1 -> 0), but compute1 runs 1 before 3, and 1
  // needs 0, which needs 3.
  add_task(s, TaskKind::gemm, compute0, {2});       // 0 waits on 2
  add_task(s, TaskKind::gemm, compute1, {0});       // 1 waits on 0
  add_task(s, TaskKind::gemm, compute1, {});        // 2 runs after 1 on compute1
  auto plan = make_stream_plan(s, LaunchMode::virtual_ranks);
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.error().message.find("deadlock"), std::string::npos) << plan.error().message;
}

TEST(StreamPlan, RejectsBadIdsDepsAndRanks) {
  Schedule s = skeleton({0, 1});
  add_task(s, TaskKind::gemm, compute0, {7});
  auto plan = make_stream_plan(s, LaunchMode::virtual_ranks);
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.error().message.find("dependency 7"), std::string::npos);

  s = skeleton({0, 1});
  add_task(s, TaskKind::gemm, Resource{5, ResourceKind::compute, 0}, {});
  plan = make_stream_plan(s, LaunchMode::virtual_ranks);
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.error().message.find("rank 5"), std::string::npos);

  s = skeleton({0, 1});
  add_task(s, TaskKind::gemm, compute0, {});
  s.tasks[0].id = 3;
  plan = make_stream_plan(s, LaunchMode::virtual_ranks);
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.error().message.find("tasks[0]"), std::string::npos);

  s = skeleton({});
  plan = make_stream_plan(s, LaunchMode::virtual_ranks);
  ASSERT_FALSE(plan.ok());
}

TEST(StreamPlan, LaunchModesPlaceRanksOnDevices) {
  Schedule s = skeleton({3, 1});
  add_task(s, TaskKind::gemm, compute0, {});
  add_task(s, TaskKind::gemm, compute1, {});
  EXPECT_EQ(rank_device(s, LaunchMode::virtual_ranks, 1), 0);
  EXPECT_EQ(rank_device(s, LaunchMode::multi_gpu, 0), 3);
  auto virt = make_stream_plan(s, LaunchMode::virtual_ranks);
  ASSERT_TRUE(virt.ok());
  EXPECT_EQ(virt->devices, std::vector<int>{0});
  auto multi = make_stream_plan(s, LaunchMode::multi_gpu);
  ASSERT_TRUE(multi.ok());
  EXPECT_EQ(multi->devices, (std::vector<int>{1, 3}));
  EXPECT_EQ(multi->streams[0].device, 3);
  EXPECT_EQ(multi->streams[1].device, 1);

  Schedule dup = skeleton({2, 2});
  auto bad = make_stream_plan(dup, LaunchMode::multi_gpu);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("virtual ranks"), std::string::npos);
  EXPECT_TRUE(make_stream_plan(dup, LaunchMode::virtual_ranks).ok());
}

}  // namespace
}  // namespace compass::backends::cuda

namespace compass::backends::cuda {
namespace {

// Every generated schedule maps onto streams, passes the request checks with --check, and
// keeps each GEMM's operands and each add's accumulator on the task's own rank (what the
// executor needs in multi-GPU mode).
TEST(StreamPlanGenerated, EveryOperatorAndStrategyMaps) {
  for (auto kind : {workload::OpKind::ag_gemm, workload::OpKind::gemm_rs, workload::OpKind::gemm_ar}) {
    for (int tp : {2, 4, 8}) {
      workload::OperatorSpec op;
      op.kind = kind;
      op.m = 512;
      op.n = 384;
      op.k = 256;
      op.tp = tp;
      for (const auto& strategy : schedule::all_strategies(4)) {
        SCOPED_TRACE(workload::describe(op) + " " + schedule::to_string(strategy));
        auto s = schedule::generate(op, strategy, schedule::default_comm_plan(tp));
        ASSERT_TRUE(s.ok()) << s.error().message;
        RunOptions o;
        o.check = true;
        auto st = check_run_request(*s, o);
        EXPECT_TRUE(st.ok()) << st.error().message;
        o.mode = LaunchMode::multi_gpu;
        auto plan = make_stream_plan(*s, LaunchMode::multi_gpu);
        ASSERT_TRUE(plan.ok()) << plan.error().message;
        EXPECT_EQ(plan->issues.size(), s->tasks.size());
        EXPECT_EQ(static_cast<int>(plan->devices.size()), tp);
        for (const auto& t : s->tasks) {
          if (t.kind == schedule::TaskKind::gemm) {
            EXPECT_EQ(s->owner(t.src), t.resource.rank) << t.name;
            EXPECT_EQ(s->owner(t.b), t.resource.rank) << t.name;
            EXPECT_EQ(s->owner(t.dst), t.resource.rank) << t.name;
          } else if (t.kind == schedule::TaskKind::add) {
            EXPECT_EQ(s->owner(t.dst), t.resource.rank) << t.name;
          }
        }
        auto blocks = reference_blocks(*s);
        ASSERT_TRUE(blocks.ok()) << blocks.error().message;
        EXPECT_EQ(static_cast<int>(blocks->size()), tp);
      }
    }
  }
}

// Every piece of every fused group of the ag_gemm fusions is released by flags the plan
// records: one per other stream holding its producers, each the event of one of them; the own
// chunk (copied on the kernel's stream) needs none. Virtual ranks and multi-GPU.
TEST(StreamPlanGenerated, FusedPiecesAreReleasedByRecordedFlags) {
  schedule::GenerateOptions gen;
  gen.fused_gemm = true;
  for (int tp : {2, 4, 8}) {
    for (const char* name : {"fuse:all2all", "fuse:ring", "fuse:double-ring"}) {
      for (LaunchMode mode : {LaunchMode::virtual_ranks, LaunchMode::multi_gpu}) {
        SCOPED_TRACE(std::string(name) + " tp " + std::to_string(tp));
        workload::OperatorSpec op;
        op.kind = workload::OpKind::ag_gemm;
        op.m = 512;
        op.n = 384;
        op.k = 256;
        op.tp = tp;
        auto s = schedule::generate(op, *schedule::parse_strategy(name),
                                    schedule::default_comm_plan(tp), gen);
        ASSERT_TRUE(s.ok()) << s.error().message;
        auto plan = make_stream_plan(*s, mode);
        ASSERT_TRUE(plan.ok()) << plan.error().message;
        auto groups = fused_groups(*s);
        ASSERT_TRUE(groups.ok()) << groups.error().message;
        ASSERT_EQ(static_cast<int>(groups->size()), tp);
        for (const FusedGroup& g : *groups) {
          int kernel_stream = -1;
          for (const TaskIssue& is : plan->issues)
            if (is.task == g.tasks.front()) kernel_stream = is.stream;
          auto flags = piece_flags(*s, *plan, kernel_stream, g.pieces);
          ASSERT_TRUE(flags.ok()) << flags.error().message;
          ASSERT_EQ(flags->size(), g.pieces.size());
          for (std::size_t i = 0; i < g.pieces.size(); ++i) {
            const Piece& piece = g.pieces[i];
            if (piece.chunk == g.rank) {
              EXPECT_TRUE((*flags)[i].empty()) << "rank " << g.rank << " own chunk";
              continue;
            }
            EXPECT_FALSE((*flags)[i].empty()) << "rank " << g.rank << " chunk " << piece.chunk;
            for (int e : (*flags)[i]) {
              ASSERT_LT(static_cast<std::size_t>(e), plan->event_task.size());
              const int producer = plan->event_task[static_cast<std::size_t>(e)];
              EXPECT_NE(std::find(piece.producers.begin(), piece.producers.end(), producer),
                        piece.producers.end())
                  << "flag " << e << " is written by task " << producer
                  << ", not a producer of chunk " << piece.chunk;
            }
          }
        }
      }
    }
  }
}

TEST(StreamPlan, PieceFlagsNameAProducerOutsideThePlan) {
  auto s = schedule::generate(
      [] {
        workload::OperatorSpec op;
        op.kind = workload::OpKind::ag_gemm;
        op.m = 64;
        op.n = 32;
        op.k = 16;
        op.tp = 2;
        return op;
      }(),
      schedule::Strategy{}, schedule::default_comm_plan(2));
  ASSERT_TRUE(s.ok());
  auto plan = make_stream_plan(*s, LaunchMode::virtual_ranks);
  ASSERT_TRUE(plan.ok());
  Piece bad;
  bad.rows = 32;
  bad.chunk = 1;
  bad.producers = {static_cast<int>(s->tasks.size()) + 3};
  auto flags = piece_flags(*s, *plan, 0, {bad});
  ASSERT_FALSE(flags.ok());
  EXPECT_NE(flags.error().message.find("not in the stream plan"), std::string::npos)
      << flags.error().message;
}

TEST(StreamPlanGenerated, ReferenceBlocksFollowOperatorSemantics) {
  workload::OperatorSpec op;
  op.kind = workload::OpKind::gemm_rs;
  op.m = 64;
  op.n = 32;
  op.k = 48;
  op.tp = 4;
  auto s = schedule::generate(op, schedule::Strategy{}, schedule::default_comm_plan(4));
  ASSERT_TRUE(s.ok()) << s.error().message;
  auto b = reference_blocks(*s);
  ASSERT_TRUE(b.ok()) << b.error().message;
  EXPECT_EQ((*b)[2].x_col, 2 * 12);  // cols block 2 of X [64, 48]
  EXPECT_EQ((*b)[2].w_row, 2 * 12);  // rows block 2 of W [48, 32]
  EXPECT_EQ((*b)[2].y_row, 2 * 16);  // rows block 2 of Y [64, 32]
  EXPECT_EQ((*b)[2].y_col, 0);

  s->op.m = 128;  // buffers no longer match the operator
  auto bad = reference_blocks(*s);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("buffer 'x' of rank 0"), std::string::npos)
      << bad.error().message;
}

}  // namespace
}  // namespace compass::backends::cuda
