// The CPU executor on hand-made schedules: correctness against the FP64 reference,
// determinism, failure handling (injected faults, wait timeouts), memory limits and the
// structural checks that keep bad schedules from touching memory they do not own.

#include "compass/backends/cpu/executor.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "compass/backends/cpu/blas.hpp"
#include "compass/backends/cpu/memory.hpp"
#include "hand_schedules.hpp"

namespace compass::backends::cpu {
namespace {

using schedule::TaskKind;
using testing::hand_ag_gemm;
using testing::hand_gemm_rs;
using workload::OpKind;

struct Outcome {
  ErrorStats error;
  RunStats stats;
};

Outcome run_and_check(const schedule::Schedule& s, std::uint64_t seed = 7,
                      const ExecutorOptions& options = {}) {
  auto data = make_operator_data(s.op, seed);
  EXPECT_TRUE(data.ok()) << data.error().message;
  auto ref = reference_output(*data);
  EXPECT_TRUE(ref.ok());
  auto ws = Workspace::create(s, *data, options);
  EXPECT_TRUE(ws.ok()) << ws.error().message;
  auto stats = run(s, *ws, options);
  EXPECT_TRUE(stats.ok()) << stats.error().message;
  return {compare_outputs(s, *ws, *ref), stats.ok() ? *stats : RunStats{}};
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

TEST(Blas, GemmOnSubRegionsUsesStrides) {
  // C[1:3, 1:4] = A[0:2, 2:5] * B[1:4, 0:3] inside larger matrices; compare with a naive loop.
  std::vector<float> a(4 * 6), b(5 * 4), c(4 * 5, 7.0f);
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(i % 7) - 3.0f;
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>(i % 5) * 0.5f;
  ASSERT_TRUE(sgemm(2, 3, 3, a.data() + 2, 6, b.data() + 4, 4, c.data() + 5 + 1, 5, false).ok());
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 5; ++j) {
      float want = 7.0f;
      if (i >= 1 && i < 3 && j >= 1 && j < 4) {
        want = 0;
        for (int l = 0; l < 3; ++l) want += a[(i - 1) * 6 + 2 + l] * b[(1 + l) * 4 + (j - 1)];
      }
      EXPECT_FLOAT_EQ(c[i * 5 + j], want) << i << "," << j;
    }
  // accumulate adds on top.
  std::vector<float> c2 = c;
  ASSERT_TRUE(sgemm(2, 3, 3, a.data() + 2, 6, b.data() + 4, 4, c2.data() + 6, 5, true).ok());
  EXPECT_FLOAT_EQ(c2[6], 2 * c[6]);
  EXPECT_FLOAT_EQ(c2[0], 7.0f);
}

TEST(Blas, RejectsBadStrides) {
  float x = 0;
  Status st = sgemm(2, 3, 4, &x, 3, &x, 3, &x, 3, false);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("leading dimension"), std::string::npos);
}

TEST(OperatorData, SeededAndInRange) {
  workload::OperatorSpec op{OpKind::ag_gemm, 8, 6, 5, 2};
  auto a = make_operator_data(op, 3);
  auto b = make_operator_data(op, 3);
  auto c = make_operator_data(op, 4);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(a->x.values, b->x.values);
  EXPECT_EQ(a->w.values, b->w.values);
  EXPECT_NE(a->x.values, c->x.values);
  for (float v : a->x.values) {
    EXPECT_GE(v, -1.0f);
    EXPECT_LT(v, 1.0f);
  }
}

TEST(OperatorData, RejectsBadOperators) {
  EXPECT_FALSE(make_operator_data({OpKind::ag_gemm, 0, 4, 4, 1}, 1).ok());
  EXPECT_FALSE(make_operator_data({OpKind::ag_gemm, 4, -4, 4, 1}, 1).ok());
  EXPECT_FALSE(make_operator_data({OpKind::ag_gemm, 4, 4, 4, 0}, 1).ok());
  auto r = make_operator_data({OpKind::gemm_rs, 8, 4, 9, 2}, 1);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("K=9"), std::string::npos) << r.error().message;
}

TEST(OperatorData, NanCountsAsInfiniteError) {
  workload::OperatorSpec op{OpKind::gemm_ar, 2, 2, 2, 1};
  HostMatrix<double> ref{2, 2, {1, 2, 3, 4}};
  std::vector<float> y{1, std::numeric_limits<float>::quiet_NaN(), 3, 4};
  ErrorStats stats;
  accumulate_error(op, 0, y.data(), 2, ref, stats);
  EXPECT_TRUE(std::isinf(stats.max_abs_error));
  EXPECT_FALSE(stats.max_rel_error <= kCheckTolerance);
}

class HandSchedules : public ::testing::TestWithParam<int> {};

TEST_P(HandSchedules, AgGemmMatchesReference) {
  const int p = GetParam();
  // Odd N per rank and odd K.
  const Outcome o = run_and_check(hand_ag_gemm(6 * p, 5 * p, 7, p));
  EXPECT_LE(o.error.max_rel_error, kCheckTolerance);
  EXPECT_EQ(o.error.elements, 6 * p * 5 * p);
  EXPECT_GT(o.error.max_ref_abs, 0.1);
}

TEST_P(HandSchedules, GemmRsMatchesReference) {
  const int p = GetParam();
  const Outcome o = run_and_check(hand_gemm_rs(4 * p, 9, 3 * p, p));
  EXPECT_LE(o.error.max_rel_error, kCheckTolerance);
  EXPECT_EQ(o.error.elements, 4 * p * 9);
}

TEST_P(HandSchedules, GemmArMatchesReference) {
  const int p = GetParam();
  const Outcome o = run_and_check(hand_gemm_rs(2 * p, 11, 5 * p, p, /*all_reduce=*/true));
  EXPECT_LE(o.error.max_rel_error, kCheckTolerance);
  EXPECT_EQ(o.error.elements, p * 2 * p * 11);
}

TEST(Executor, CheckCatchesAWrongSchedule) {
  // Drop the last GEMM chunk: part of the output stays zero and the check must notice.
  auto s = hand_ag_gemm(8, 4, 5, 2);
  s.tasks.pop_back();
  const Outcome o = run_and_check(s);
  EXPECT_GT(o.error.max_rel_error, 0.01);
}

INSTANTIATE_TEST_SUITE_P(Ranks, HandSchedules, ::testing::Values(1, 2, 3, 4, 8));

TEST(Executor, StatsCountWork) {
  const auto s = hand_ag_gemm(8, 6, 5, 2);
  const Outcome o = run_and_check(s);
  EXPECT_EQ(o.stats.tasks, static_cast<int>(s.tasks.size()));
  EXPECT_EQ(o.stats.threads, 4);  // compute + one copy engine per rank
  EXPECT_DOUBLE_EQ(o.stats.gemm_flops, 2.0 * 8 * 6 * 5);
  EXPECT_EQ(o.stats.transfer_bytes, 2 * 4 * 5 * 4);
  EXPECT_GE(o.stats.wall_s, 0.0);
}

TEST(Executor, RepeatedRunsAreBitIdentical) {
  const auto s = hand_gemm_rs(64, 48, 96, 4, true);
  auto data = make_operator_data(s.op, 11);
  ASSERT_TRUE(data.ok());
  auto ws1 = Workspace::create(s, *data);
  auto ws2 = Workspace::create(s, *data);
  ASSERT_TRUE(ws1.ok() && ws2.ok());
  ASSERT_TRUE(run(s, *ws1).ok());
  for (int i = 0; i < 3; ++i) {
    ws2->reset(*data);
    ASSERT_TRUE(run(s, *ws2).ok());
    ASSERT_EQ(ws1->buffers(), ws2->buffers()) << "run " << i;
  }
}

TEST(Executor, InjectedFaultNamesRankAndTaskAndStopsEveryone) {
  const auto s = hand_gemm_rs(32, 16, 32, 4);
  // Fail a task of rank 2 while another task sleeps for a long time: the sleeper must be
  // woken by the abort, not run its course.
  int fail = -1, sleeper = -1;
  for (const auto& t : s.tasks) {
    if (t.name == "r2 rs to r3") fail = t.id;
    if (t.name == "r0 partial") sleeper = t.id;
  }
  ASSERT_GE(fail, 0);
  ASSERT_GE(sleeper, 0);
  ExecutorOptions o;
  o.fail_task_id = fail;
  o.delay_task_id = sleeper;
  o.delay_s = 60;
  o.wait_timeout_s = 120;
  auto data = make_operator_data(s.op, 1);
  auto ws = Workspace::create(s, *data, o);
  ASSERT_TRUE(ws.ok());
  const auto t0 = std::chrono::steady_clock::now();
  auto r = run(s, *ws, o);
  const double elapsed = seconds_since(t0);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message, fmt::format("rank 2 task {} 'r2 rs to r3': injected fault", fail));
  EXPECT_LT(elapsed, 5.0);  // generous: the design target is well under a second
}

TEST(Executor, GemmPiecesGiveBitIdenticalResults) {
  // The smallest pieces allowed (192 rows; N x K = 2^18, so 192 rows reach the minimum size)
  // against one BLAS call per GEMM: every buffer bit for bit.
  for (const auto& s : {hand_ag_gemm(1536, 1024, 512, 2), hand_gemm_rs(768, 512, 1024, 2)}) {
    auto data = make_operator_data(s.op, 3);
    ASSERT_TRUE(data.ok());
    ExecutorOptions whole, pieces;
    whole.gemm_piece_flops = 0;
    pieces.gemm_piece_flops = 1;
    ExecutorOptions::PieceCounts counts;
    pieces.piece_counts = &counts;
    auto ws1 = Workspace::create(s, *data, whole);
    auto ws2 = Workspace::create(s, *data, pieces);
    ASSERT_TRUE(ws1.ok() && ws2.ok());
    ASSERT_TRUE(run(s, *ws1, whole).ok());
    ASSERT_TRUE(run(s, *ws2, pieces).ok());
    EXPECT_TRUE(ws1->buffers() == ws2->buffers()) << "results changed";
    std::int64_t want = 0;
    for (const auto& t : s.tasks)
      if (t.kind == TaskKind::gemm) {
        ASSERT_GE(static_cast<double>(kGemmPieceRowAlign) * t.dst.cols * t.src.cols,
                  kGemmPieceMinMnk);
        want += t.dst.rows / kGemmPieceRowAlign;
      }
    EXPECT_EQ(counts.run.load(), want);
    EXPECT_EQ(counts.after_stop.load(), 0);
  }
}

TEST(Executor, FailingRankStopsALongGemmOfAnotherRank) {
  // GEMM-RS 8192^3 at tp 2: each rank's partial GEMM is 5.5e11 FLOPs (seconds on any CPU).
  // Rank 1's GEMM fails one second in; rank 0's must stop at its next piece (192 rows, 1.3e10
  // FLOPs), not run on.
#if defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "2.3 GB of buffers: too much shadow memory under ThreadSanitizer";
#endif
  const auto s = hand_gemm_rs(8192, 8192, 8192, 2);
  int fail = -1;
  for (const auto& t : s.tasks)
    if (t.name == "r1 partial") fail = t.id;
  ASSERT_GE(fail, 0);
  ExecutorOptions o;
  o.fail_task_id = fail;
  o.delay_task_id = fail;
  o.delay_s = 1.0;
  o.wait_timeout_s = 600;
  ExecutorOptions::PieceCounts counts;
  o.piece_counts = &counts;
  auto data = make_operator_data(s.op, 1);
  ASSERT_TRUE(data.ok());
  auto ws = Workspace::create(s, *data, o);
  ASSERT_TRUE(ws.ok()) << ws.error().message;
  const auto t0 = std::chrono::steady_clock::now();
  auto r = run(s, *ws, o);
  const double elapsed = seconds_since(t0);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("injected fault"), std::string::npos) << r.error().message;
  const std::int64_t pieces_per_gemm = 8192 / kGemmPieceRowAlign;  // the last one longer
  EXPECT_GE(counts.run.load(), 1) << "rank 0's GEMM had started";
  EXPECT_LT(counts.run.load(), pieces_per_gemm) << "rank 0's GEMM ran to its end";
  EXPECT_LE(counts.after_stop.load(), 1) << "more than the one piece in flight ran after the stop";
  EXPECT_LT(elapsed, 30.0);  // generous: a loaded machine; the pieces above are the real check
}

TEST(Executor, TaskFailureOnEveryTaskIsClean) {
  // Any task may fail; each time the run ends with an error naming exactly that task.
  const auto s = hand_ag_gemm(6, 6, 3, 3);
  auto data = make_operator_data(s.op, 1);
  auto ws = Workspace::create(s, *data);
  ASSERT_TRUE(ws.ok());
  for (const auto& t : s.tasks) {
    ExecutorOptions o;
    o.fail_task_id = t.id;
    auto r = run(s, *ws, o);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().message.find(fmt::format("task {} '{}'", t.id, t.name)), std::string::npos)
        << r.error().message;
  }
}

TEST(Executor, WaitTimeoutNamesWaiterAndMissingTask) {
  const auto s = hand_ag_gemm(4, 4, 3, 2);
  int slow = -1;
  for (const auto& t : s.tasks)
    if (t.name == "r1 send to r0") slow = t.id;
  ASSERT_GE(slow, 0);
  ExecutorOptions o;
  o.delay_task_id = slow;
  o.delay_s = 30;
  o.wait_timeout_s = 0.3;
  auto data = make_operator_data(s.op, 1);
  auto ws = Workspace::create(s, *data, o);
  ASSERT_TRUE(ws.ok());
  const auto t0 = std::chrono::steady_clock::now();
  auto r = run(s, *ws, o);
  const double elapsed = seconds_since(t0);
  ASSERT_FALSE(r.ok());
  const std::string& msg = r.error().message;
  EXPECT_NE(msg.find("waited more than 0.3 s for"), std::string::npos) << msg;
  EXPECT_NE(msg.find(fmt::format("task {} 'r1 send to r0'", slow)), std::string::npos) << msg;
  EXPECT_EQ(msg.rfind("rank 0 task", 0), 0u) << msg;  // the waiter is rank 0's GEMM
  EXPECT_LT(elapsed, 5.0);
}

TEST(Executor, MemoryLimitIsCheckedBeforeAllocating) {
  const auto s = hand_ag_gemm(64, 64, 64, 2);
  auto data = make_operator_data(s.op, 1);
  ExecutorOptions o;
  o.memory_limit_bytes = 1000;
  auto ws = Workspace::create(s, *data, o);
  ASSERT_FALSE(ws.ok());
  EXPECT_NE(ws.error().message.find("memory limit"), std::string::npos) << ws.error().message;
  EXPECT_NE(ws.error().message.find(std::to_string(Workspace::bytes_needed(s))), std::string::npos);
}

TEST(Memory, ReadsMemAvailable) {
  auto avail = memory_available_bytes();
  ASSERT_TRUE(avail.ok()) << avail.error().message;
  EXPECT_GT(*avail, 0);
  auto limit = memory_limit_bytes(0);
  ASSERT_TRUE(limit.ok());
  EXPECT_LT(*limit, *avail);
  EXPECT_FALSE(check_memory(std::int64_t{1} << 62, 0, "huge").ok());
}

TEST(Executor, WorkspaceRejectsWrongBuffers) {
  auto s = hand_ag_gemm(4, 4, 3, 2);
  auto data = make_operator_data(s.op, 1);
  ASSERT_TRUE(data.ok());
  auto bad = s;
  bad.buffers[3].name = "out";  // rank 0's "y"
  auto ws = Workspace::create(bad, *data);
  ASSERT_FALSE(ws.ok());
  EXPECT_EQ(ws.error().message, "rank 0 has no buffer 'y'");
  bad = s;
  bad.buffers[1].cols = 3;  // rank 0's "w"
  bad.tasks.clear();
  ws = Workspace::create(bad, *data);
  ASSERT_FALSE(ws.ok());
  EXPECT_NE(ws.error().message.find("buffer 'w' of rank 0 is [3, 3]"), std::string::npos)
      << ws.error().message;
  auto other = make_operator_data({OpKind::ag_gemm, 8, 4, 3, 2}, 1);
  ws = Workspace::create(s, *other);
  ASSERT_FALSE(ws.ok());
  EXPECT_NE(ws.error().message.find("data is for ag_gemm M=8"), std::string::npos);
}

TEST(CheckExecutable, RejectsOutOfBoundsRegions) {
  auto s = hand_ag_gemm(4, 4, 3, 2);
  s.tasks[1].dst.row = 3;  // rows [3, 5) of a 4-row buffer
  Status st = check_executable(s);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find(
                fmt::format("task 1 ('{}'): dst region rows [3, 5)", s.tasks[1].name)),
            std::string::npos)
      << st.error().message;
}

TEST(CheckExecutable, RejectsGemmShapeMismatchAndBadDeps) {
  auto s = hand_ag_gemm(4, 4, 3, 2);
  auto g = s;
  for (auto& t : g.tasks)
    if (t.kind == TaskKind::gemm) {
      t.b.rows = 2;
      break;
    }
  ASSERT_FALSE(check_executable(g).ok());
  EXPECT_NE(check_executable(g).error().message.find("gemm shapes"), std::string::npos);
  auto d = s;
  d.tasks[0].deps = {999};
  ASSERT_FALSE(check_executable(d).ok());
  d.tasks[0].deps = {0};
  ASSERT_FALSE(check_executable(d).ok());
}

TEST(CheckExecutable, RejectsDeadlockFromResourceOrder) {
  // Rank 0's copy engine runs "own" then "send"; make "own" wait for a GEMM that waits for
  // "send": never finishes, so it must be rejected up front.
  auto s = hand_ag_gemm(4, 4, 3, 2);
  int own = -1, gemm_on_sent = -1;
  for (const auto& t : s.tasks) {
    if (t.name == "r0 own") own = t.id;
    if (t.name == "r1 gemm c0") gemm_on_sent = t.id;
  }
  ASSERT_GE(own, 0);
  ASSERT_GE(gemm_on_sent, 0);
  s.tasks[static_cast<std::size_t>(own)].deps.push_back(gemm_on_sent);
  Status st = check_executable(s);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("dependency cycle"), std::string::npos) << st.error().message;
}

// A transfer engine that counts what passes through it, or fails on demand.
class CountingEngine final : public TransferEngine {
 public:
  std::atomic<std::int64_t> bytes{0};
  std::atomic<int> calls{0};
  int fail_on_call = -1;
  void transfer(const TransferRequest& r, std::stop_token stop) override {
    const int n = calls.fetch_add(1);
    if (n == fail_on_call) throw std::runtime_error("link down");
    bytes += r.bytes;
    inner_.transfer(r, stop);
  }

 private:
  MemcpyTransferEngine inner_;
};

TEST(Executor, TransfersGoThroughThePluggedEngine) {
  const auto s = hand_ag_gemm(12, 6, 5, 3);
  auto engine = std::make_shared<CountingEngine>();
  ExecutorOptions o;
  o.transfer_engine = engine;
  const Outcome out = run_and_check(s, 5, o);
  EXPECT_LE(out.error.max_rel_error, kCheckTolerance);
  EXPECT_EQ(engine->calls.load(), 3 * 2);
  EXPECT_EQ(engine->bytes.load(), 3 * 2 * 4 * 5 * 4);  // fp32 operator: 4 bytes per element

  engine->fail_on_call = 0;
  engine->calls = 0;
  auto data = make_operator_data(s.op, 1);
  auto ws = Workspace::create(s, *data, o);
  auto r = run(s, *ws, o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("link down"), std::string::npos);
}

}  // namespace
}  // namespace compass::backends::cpu
