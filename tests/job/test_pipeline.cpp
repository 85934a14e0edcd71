// Pipeline schedules followed event by event, against timelines worked out by hand.
#include <gtest/gtest.h>

#include <span>
#include <tuple>

#include "compass/job/dp_overlap.hpp"
#include "compass/job/events.hpp"
#include "compass/job/pipeline.hpp"

namespace compass::job {
namespace {

double makespan(const PipelineSpec& spec) {
  Result<PipelineTasks> t = pipeline_tasks(spec);
  EXPECT_TRUE(t.ok()) << (t.ok() ? "" : t.error().message);
  Result<Followed> f = follow(t->list);
  EXPECT_TRUE(f.ok()) << (f.ok() ? "" : f.error().message);
  return f->makespan_s;
}

PipelineSpec uniform(int p, int v, int m, double f, double b, double send = 0) {
  PipelineSpec s;
  s.stages = p;
  s.chunks = v;
  s.microbatches = m;
  s.forward_s.assign(p * v, f);
  s.backward_s.assign(p * v, b);
  s.send_s.assign(p * v - 1, send);
  return s;
}

TEST(Pipeline, OneF1BEqualStagesIsMPlusPMinusOneTimesFPlusB) {
  // p = 2, m = 4, f = 1, b = 2: stage 0 runs F0 F1 B0 F2 B1 F3 B2 B3, stage 1 alternates;
  // the last backward on stage 0 ends at (4 + 2 - 1) * 3 = 15.
  EXPECT_DOUBLE_EQ(makespan(uniform(2, 1, 4, 1, 2)), 15.0);
  // Four stages, eight micro-batches: (8 + 3) * (1.5 + 2.5) = 44.
  EXPECT_DOUBLE_EQ(makespan(uniform(4, 1, 8, 1.5, 2.5)), 44.0);
}

TEST(Pipeline, UnevenStagesFollowTheSlowStageNotTheClosedForm) {
  // Stage 0: f = b = 1; stage 1: f = b = 2; m = 2. By hand: s0 F0 [0,1]; s1 F0 [1,3], B0 [3,5];
  // s0 F1 [1,2]; s0 B0 [5,6]; s1 F1 [5,7], B1 [7,9]; s0 B1 [9,10]. The closed form with the
  // slowest stage, (m + p - 1)(f + b) = 12, overstates it.
  PipelineSpec s = uniform(2, 1, 2, 0, 0);
  s.forward_s = {1, 2};
  s.backward_s = {1, 2};
  EXPECT_DOUBLE_EQ(makespan(s), 10.0);
}

TEST(Pipeline, SendsDelayDependentPasses) {
  // One micro-batch, f = b = 1, 0.5 per send: F s0 [0,1], F s1 [1.5,2.5], B s1 [2.5,3.5],
  // B s0 [4,5].
  EXPECT_DOUBLE_EQ(makespan(uniform(2, 1, 1, 1, 1, 0.5)), 5.0);
}

TEST(Pipeline, InterleavingShrinksTheBubbleByTheChunkCount) {
  // p = 2, v = 2, m = 2, every chunk f = b = 1 (a stage's work per micro-batch is 4). Traced by
  // hand in Megatron-LM's order: 10 = 2 * 4 + (p - 1) * 4 / v. Without interleaving the same
  // stages (f = b = 2) take (m + p - 1) * 4 = 12.
  EXPECT_DOUBLE_EQ(makespan(uniform(2, 2, 2, 1, 1)), 10.0);
  EXPECT_DOUBLE_EQ(makespan(uniform(2, 1, 2, 2, 2)), 12.0);
}

TEST(Pipeline, InterleavedBubbleMatchesTheClosedFormOnEqualChunks) {
  // Narayanan et al.: the interleaved bubble is (p - 1) (f + b) / v of a stage's per-micro-batch
  // work. p = 4, v = 2, m = 8, every chunk f = 1, b = 2 (a stage: 6 per micro-batch):
  // 8 * 6 + 3 * 6 / 2 = 57; plain 1F1B on the same stages: (8 + 3) * 6 = 66.
  EXPECT_DOUBLE_EQ(makespan(uniform(4, 2, 8, 1, 2)), 57.0);
  EXPECT_DOUBLE_EQ(makespan(uniform(4, 1, 8, 2, 4)), 66.0);
}

TEST(Pipeline, RejectsBadShapes) {
  EXPECT_FALSE(pipeline_tasks(uniform(2, 2, 3, 1, 1)).ok());  // 3 micro-batches, 2 stages
  PipelineSpec s = uniform(2, 1, 2, 1, 1);
  s.send_s.clear();
  EXPECT_FALSE(pipeline_tasks(s).ok());
}

TEST(Events, ACycleIsAnErrorNotAHang) {
  TaskList l;
  l.add(Task{0, 1}, {{1, 0}});
  l.add(Task{1, 1}, {{0, 0}});
  l.order = {{0}, {1}};
  Result<Followed> f = follow(l);
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.error().message.find("can never start"), std::string::npos);
}

TEST(Events, ADependencyIndexThatDoesNotMatchIsAnError) {
  TaskList l;
  l.add(Task{0, 1}, {});
  l.add(Task{0, 1}, {{0, 0}});
  l.order = {{0, 1}};
  ASSERT_TRUE(follow(l).ok());
  TaskList short_index = l;
  short_index.dep_begin.pop_back();
  TaskList past_the_end = l;
  past_the_end.dep_begin.back() = 5;
  TaskList decreasing = l;
  decreasing.dep_begin = {0, 1, 0};
  for (const TaskList* bad : {&short_index, &past_the_end, &decreasing}) {
    Result<Followed> f = follow(*bad);
    ASSERT_FALSE(f.ok());
    EXPECT_NE(f.error().message.find("dependency index"), std::string::npos) << f.error().message;
  }
}

TEST(Pipeline, EveryPassWaitsForItsNeighboursInTheListItBuilds) {
  // Forward of virtual stage u waits for u - 1's forward (one send later); a backward waits for
  // its own forward and for u + 1's backward: two stages, two chunks, two micro-batches.
  PipelineSpec s = uniform(2, 2, 2, 1, 1, 0.25);
  Result<PipelineTasks> t = pipeline_tasks(s);
  ASSERT_TRUE(t.ok());
  const int vs = 4, m = 2;
  ASSERT_EQ(t->list.tasks.size(), static_cast<std::size_t>(2 * vs * m));
  for (int u = 0; u < vs; ++u)
    for (int j = 0; j < m; ++j) {
      const int f = (u * m + j) * 2, b = f + 1;
      EXPECT_EQ(t->info[f].stage, u % 2);
      EXPECT_EQ(t->info[f].chunk, u / 2);
      EXPECT_EQ(t->info[f].microbatch, j);
      EXPECT_TRUE(t->info[f].forward);
      EXPECT_FALSE(t->info[b].forward);
      std::vector<Dependency> fd(t->list.deps_of(f).begin(), t->list.deps_of(f).end());
      std::vector<Dependency> bd(t->list.deps_of(b).begin(), t->list.deps_of(b).end());
      std::vector<Dependency> want_f;
      if (u > 0) want_f.push_back({f - 2 * m, 0.25});
      EXPECT_EQ(fd, want_f);
      std::vector<Dependency> want_b = {{f, 0}};
      if (u + 1 < vs) want_b.push_back({b + 2 * m, 0.25});
      EXPECT_EQ(bd, want_b);
    }
}

// Times that differ per virtual stage, pass and boundary, so that a time set on the wrong task
// or dependency shows.
PipelineSpec distinct_times(int p, int v, int m, double scale) {
  PipelineSpec s = uniform(p, v, m, 0, 0);
  for (int u = 0; u < p * v; ++u) {
    s.forward_s[u] = scale * (1 + u);
    s.backward_s[u] = scale * (100 + 3 * u);
    if (u + 1 < p * v) s.send_s[u] = scale * (0.01 + 0.001 * u);
  }
  return s;
}

TEST(Pipeline, TheCacheGivesTheListPipelineTasksBuilds) {
  PipelineCache cache;
  // The same shape again (times set anew), another shape, back to the first, interleaved.
  const std::vector<PipelineSpec> specs = {distinct_times(2, 1, 4, 1), distinct_times(2, 1, 4, 0.5),
                                           distinct_times(4, 2, 8, 1), distinct_times(4, 2, 8, 2.5),
                                           distinct_times(2, 1, 4, 3), distinct_times(3, 1, 1, 1)};
  for (const PipelineSpec& s : specs) {
    Result<PipelineTasks> built = pipeline_tasks(s);
    ASSERT_TRUE(built.ok()) << built.error().message;
    Result<const PipelineTasks*> kept = cache.tasks(s);
    ASSERT_TRUE(kept.ok()) << kept.error().message;
    EXPECT_EQ((*kept)->list, built->list) << s.stages << " stages, " << s.chunks << " chunks";
    ASSERT_EQ((*kept)->info.size(), built->info.size());
    for (std::size_t t = 0; t < built->info.size(); ++t) {
      const PipelineTaskInfo& a = (*kept)->info[t];
      const PipelineTaskInfo& b = built->info[t];
      EXPECT_EQ(std::make_tuple(a.stage, a.chunk, a.microbatch, a.forward),
                std::make_tuple(b.stage, b.chunk, b.microbatch, b.forward));
      // Each pass takes its virtual stage's time; its sends their boundary's.
      const int u = a.chunk * s.stages + a.stage, vs = s.stages * s.chunks;
      const std::span<const Dependency> deps = (*kept)->list.deps_of(static_cast<int>(t));
      if (a.forward) {
        EXPECT_EQ((*kept)->list.tasks[t].duration_s, s.forward_s[u]);
        if (u > 0) {
          EXPECT_EQ(deps[0].lag_s, s.send_s[u - 1]);
        }
      } else {
        EXPECT_EQ((*kept)->list.tasks[t].duration_s, s.backward_s[u]);
        EXPECT_EQ(deps[0].lag_s, 0.0);
        if (u + 1 < vs) {
          EXPECT_EQ(deps[1].lag_s, s.send_s[u]);
        }
      }
    }
  }
  // The same errors as pipeline_tasks, and a good spec after a bad one is still right.
  PipelineSpec bad = distinct_times(2, 1, 4, 1);
  bad.backward_s[1] = -1;
  Result<const PipelineTasks*> refused = cache.tasks(bad);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().message, pipeline_tasks(bad).error().message);
  Result<const PipelineTasks*> after = cache.tasks(specs.front());
  ASSERT_TRUE(after.ok());
  EXPECT_EQ((*after)->list, pipeline_tasks(specs.front())->list);
}

TEST(DpOverlap, ReduceBucketsQueueOnOneStream) {
  // Ready at 1, 2, 3; 1.5 each: ends 2.5, 4, 5.5; compute ends at 3 -> 2.5 exposed.
  EXPECT_DOUBLE_EQ(exposed_reduce_s({{1, 1.5}, {2, 1.5}, {3, 1.5}}, 3), 2.5);
  // Short enough to hide: ends 1.5, 2.5, 3.5 -> 0.5 beyond compute end 3.
  EXPECT_DOUBLE_EQ(exposed_reduce_s({{1, 0.5}, {2, 0.5}, {3, 0.5}}, 3), 0.5);
  EXPECT_DOUBLE_EQ(exposed_reduce_s({{1, 0.5}, {2, 0.5}, {3, 0.5}}, 4), 0.0);
}

TEST(DpOverlap, GatherDelaysComputeByTheLatestBucket) {
  // Needed at 0, 1, 2; 0.5 each: arrive 0.5, 1.0, 1.5 -> the first is 0.5 late.
  EXPECT_DOUBLE_EQ(exposed_gather_s({{0, 0.5}, {1, 0.5}, {2, 0.5}}), 0.5);
  // Needed at 0, 0.1, 0.2; 1 each: arrive 1, 2, 3 -> 2.8 late.
  EXPECT_NEAR(exposed_gather_s({{0, 1}, {0.1, 1}, {0.2, 1}}), 2.8, 1e-12);
}

}  // namespace
}  // namespace compass::job
