// One process per GPU, the parts that need no GPU: the NCCL call that replaces a sequential
// schedule's ring, the IPC plan of one rank (its tasks, the flags it waits on and the flags
// it writes into other processes), GPU sharing under NCCL, the handle exchange format and the
// argument checks. Without a GPU, preparing a run says so.
#include "compass/backends/cuda/process_plan.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>

#include "compass/backends/cuda/process_run.hpp"
#include "compass/schedule/generate.hpp"

namespace compass::backends::cuda {
namespace {

using schedule::Schedule;
using schedule::Strategy;
using schedule::StrategyKind;
using schedule::TaskKind;

Schedule make(workload::OpKind kind, int p, Strategy st, std::int64_t m = 96) {
  workload::OperatorSpec op;
  op.kind = kind;
  op.m = m;
  op.n = 48;
  op.k = 36;
  op.tp = p;
  op.dtype = DType::bf16;
  auto s = schedule::generate(op, st, schedule::default_comm_plan(p));
  EXPECT_TRUE(s.ok()) << s.error().message;
  return s.ok() ? *s : Schedule{};
}

const Strategy kSequential{StrategyKind::sequential, 0};

std::string name_of(const Schedule& s, int buffer) {
  return s.buffers[static_cast<std::size_t>(buffer)].name;
}

TEST(ProcessNccl, SequentialAgGemmAllGathersXIntoXg) {
  for (int p : {2, 3, 4}) {
    const Schedule s = make(workload::OpKind::ag_gemm, p, kSequential);
    for (int r = 0; r < p; ++r) {
      auto c = nccl_call(s, r);
      ASSERT_TRUE(c.ok()) << c.error().message;
      EXPECT_EQ(c->kind, NcclCall::Kind::all_gather);
      EXPECT_EQ(name_of(s, c->send), "x");
      EXPECT_EQ(name_of(s, c->recv), "xg");
      EXPECT_EQ(s.buffers[static_cast<std::size_t>(c->send)].rank, r);
      EXPECT_EQ(c->count, 96 / p * 36);
      EXPECT_FALSE(c->gemms_first);
      ASSERT_FALSE(c->gemms.empty());
      for (int t : c->gemms) {
        EXPECT_EQ(s.tasks[static_cast<std::size_t>(t)].resource.rank, r);
        EXPECT_EQ(s.tasks[static_cast<std::size_t>(t)].src.buffer, c->recv);
      }
    }
  }
}

TEST(ProcessNccl, SequentialGemmRsReduceScattersPartIntoY) {
  const Schedule s = make(workload::OpKind::gemm_rs, 4, kSequential);
  for (int r = 0; r < 4; ++r) {
    auto c = nccl_call(s, r);
    ASSERT_TRUE(c.ok()) << c.error().message;
    EXPECT_EQ(c->kind, NcclCall::Kind::reduce_scatter);
    EXPECT_EQ(name_of(s, c->send), "part");
    EXPECT_EQ(name_of(s, c->recv), "y");
    EXPECT_EQ(c->count, 96 / 4 * 48);  // per rank: its row block of Y
    EXPECT_TRUE(c->gemms_first);
    for (int t : c->gemms) EXPECT_EQ(s.tasks[static_cast<std::size_t>(t)].dst.buffer, c->send);
  }
}

TEST(ProcessNccl, SequentialGemmArAllReducesYInPlaceAlsoWithUnevenRows) {
  // 98 rows over 4 ranks: uneven chunks in the ring, one in-place all-reduce for NCCL.
  const Schedule s = make(workload::OpKind::gemm_ar, 4, kSequential, 98);
  auto c = nccl_call(s, 2);
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->kind, NcclCall::Kind::all_reduce);
  EXPECT_EQ(c->send, c->recv);
  EXPECT_EQ(name_of(s, c->send), "y");
  EXPECT_EQ(c->count, 98 * 48);
  EXPECT_TRUE(c->gemms_first);
  EXPECT_EQ(to_string(c->kind), "all-reduce");
}

TEST(ProcessNccl, OnlySequentialOnTwoOrMoreRanksAndMatchingBuffers) {
  const Schedule ring = make(workload::OpKind::ag_gemm, 2, {StrategyKind::fuse_ring, 0});
  EXPECT_FALSE(uses_nccl(ring));
  auto e = nccl_call(ring, 0);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.error().message.find("only the sequential strategy"), std::string::npos);
  EXPECT_FALSE(uses_nccl(make(workload::OpKind::ag_gemm, 1, kSequential)));
  EXPECT_FALSE(uses_nccl(make(workload::OpKind::ag_gemm, 2, {StrategyKind::decompose, 2})));

  Schedule s = make(workload::OpKind::gemm_rs, 2, kSequential);
  EXPECT_FALSE(nccl_call(s, 2).ok());
  // Unequal row blocks: NCCL's reduce-scatter cannot do them.
  const int y1 = s.find_buffer(1, "y");
  s.buffers[static_cast<std::size_t>(y1)].rows -= 8;
  e = nccl_call(s, 0);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.error().message.find("equal row blocks"), std::string::npos) << e.error().message;
  // A schedule without the gathered buffer.
  Schedule ag = make(workload::OpKind::ag_gemm, 2, kSequential);
  ag.buffers[static_cast<std::size_t>(ag.find_buffer(0, "xg"))].name = "other";
  e = nccl_call(ag, 0);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.error().message.find("no buffer 'xg'"), std::string::npos) << e.error().message;
}

// For every rank: its issues are exactly its tasks; every wait of a task on a producer in
// another process is matched by that producer's signal to the task's rank, and nothing else is
// signalled; waits inside one process stay events.
void expect_consistent_plans(const Schedule& s) {
  const int p = s.ranks();
  std::vector<ProcessPlan> plans;
  for (int r = 0; r < p; ++r) {
    auto pp = make_process_plan(s, r);
    ASSERT_TRUE(pp.ok()) << pp.error().message;
    plans.push_back(std::move(pp).value());
  }
  std::set<std::pair<int, int>> waited, signalled;  // (producer task, consumer rank)
  for (int r = 0; r < p; ++r) {
    const ProcessPlan& pp = plans[static_cast<std::size_t>(r)];
    std::size_t own = 0;
    for (const auto& t : s.tasks) own += t.resource.rank == r ? 1 : 0;
    ASSERT_EQ(pp.issues.size(), own);
    EXPECT_TRUE(std::is_sorted(pp.issues.begin(), pp.issues.end()));
    for (int i : pp.issues) {
      const TaskIssue& is = pp.plan.issues[static_cast<std::size_t>(i)];
      EXPECT_EQ(s.tasks[static_cast<std::size_t>(is.task)].resource.rank, r);
      EXPECT_EQ(pp.plan.streams[static_cast<std::size_t>(is.stream)].rank, r);
      for (int e : is.wait_events) {
        const int producer = pp.plan.event_task[static_cast<std::size_t>(e)];
        if (s.tasks[static_cast<std::size_t>(producer)].resource.rank == r) continue;
        waited.insert({producer, r});
        EXPECT_TRUE(pp.awaited[static_cast<std::size_t>(producer)]);
      }
    }
    for (std::size_t t = 0; t < s.tasks.size(); ++t) {
      if (!pp.signals[t].empty()) {
        EXPECT_EQ(s.tasks[t].resource.rank, r) << "task " << t;
      }
      for (int to : pp.signals[t]) {
        EXPECT_NE(to, r);
        signalled.insert({static_cast<int>(t), to});
      }
    }
  }
  EXPECT_EQ(waited, signalled);
}

TEST(ProcessPlan, EveryStrategyWaitsOnlyOnSignalledFlags) {
  for (auto kind : {workload::OpKind::ag_gemm, workload::OpKind::gemm_rs, workload::OpKind::gemm_ar})
    for (int p : {2, 3, 4})
      for (const Strategy& st : schedule::all_strategies(2)) {
        SCOPED_TRACE(fmt::format("{} p={} {}", workload::to_string(kind), p,
                                 schedule::to_string(st)));
        expect_consistent_plans(make(kind, p, st));
      }
}

TEST(ProcessPlan, CrossProcessTransfersAreSignalled) {
  const Schedule s = make(workload::OpKind::ag_gemm, 2, {StrategyKind::fuse_ring, 0});
  auto pp = make_process_plan(s, 0);
  ASSERT_TRUE(pp.ok());
  int signals = 0;
  for (const auto& to : pp->signals) signals += static_cast<int>(to.size());
  EXPECT_GT(signals, 0) << "a ring on two ranks must hand chunks to the other process";
  EXPECT_FALSE(make_process_plan(s, 2).ok());
  EXPECT_FALSE(make_process_plan(s, -1).ok());
}

TEST(ProcessNccl, GpuSharingNeedsNccl230AndTheVariable) {
  EXPECT_TRUE(check_nccl_gpu_sharing({"0000:01:00.0", "0000:02:00.0"}, 22803, false).ok());
  auto old = check_nccl_gpu_sharing({"0000:01:00.0", "0000:01:00.0"}, 22803, true);
  ASSERT_FALSE(old.ok());
  EXPECT_NE(old.error().message.find("ranks 0 and 1 share GPU 0000:01:00.0"), std::string::npos)
      << old.error().message;
  EXPECT_NE(old.error().message.find("NCCL 2.28.3 refuses"), std::string::npos)
      << old.error().message;
  auto unset = check_nccl_gpu_sharing({"a", "b", "a"}, 23001, false);
  ASSERT_FALSE(unset.ok());
  EXPECT_NE(unset.error().message.find("ranks 0 and 2"), std::string::npos);
  EXPECT_NE(unset.error().message.find("NCCL_MULTI_RANK_GPU_ENABLE=1"), std::string::npos);
  EXPECT_TRUE(check_nccl_gpu_sharing({"a", "a"}, 23001, true).ok());
}

TEST(ProcessIpc, HandlesRoundTripAndBadSizesNameTheRank) {
  const std::vector<std::string> records = {std::string(64, 'a'), std::string(64, 'b')};
  const std::string packed = pack_records(records);
  auto back = unpack_records(packed, 64, 2, 3);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, records);
  auto bad = unpack_records(packed.substr(1), 64, 2, 3);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("rank 3 sent 127 bytes"), std::string::npos)
      << bad.error().message;
  EXPECT_FALSE(unpack_records(packed, 64, 3, 1).ok());
}

TEST(ProcessRequest, ChecksThatNeedNoGpu) {
  const Schedule s = make(workload::OpKind::ag_gemm, 2, {StrategyKind::fuse_ring, 0});
  ProcessRunOptions o;
  EXPECT_TRUE(check_process_request(s, o, 2).ok());
  auto e = check_process_request(s, o, 3);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.error().message.find("3 processes were started but the schedule has 2 ranks"),
            std::string::npos);
  auto with = [&](auto change) {
    ProcessRunOptions x;
    change(x);
    auto st = check_process_request(s, x, 2);
    return st.ok() ? std::string() : st.error().message;
  };
  EXPECT_NE(with([](ProcessRunOptions& x) { x.mode = LaunchMode::multi_gpu; }).find("multi-gpu"),
            std::string::npos);
  EXPECT_NE(with([](ProcessRunOptions& x) { x.sync = SyncMode::flags; }).find("--sync flags"),
            std::string::npos);
  EXPECT_NE(with([](ProcessRunOptions& x) { x.kernel = KernelMode::fused; }).find("chunked"),
            std::string::npos);
  EXPECT_NE(with([](ProcessRunOptions& x) { x.wait_timeout_s = 0; }).find("wait timeout"),
            std::string::npos);
  EXPECT_NE(with([](ProcessRunOptions& x) { x.repeat = 0; }).find("repeat"), std::string::npos);
  EXPECT_TRUE(with([](ProcessRunOptions& x) { x.kernel = KernelMode::chunked; }).empty());
}

// A process group of one process that pretends to have `size` ranks; never exchanges.
class LonelyGroup final : public launch::ProcessGroup {
 public:
  explicit LonelyGroup(int size) : size_(size) {}
  int rank() const override { return 0; }
  int size() const override { return size_; }
  int local_rank() const override { return 0; }
  Result<std::vector<std::string>> all_gather(const std::string&, double) override {
    return make_error("no other process");
  }
  Status peers_ok() override { return Status::success(); }
  void announce_failure(const std::string&) override {}

 private:
  int size_;
};

TEST(ProcessRequest, WithoutADeviceCreateSaysSo) {
  if (device_available().ok()) GTEST_SKIP() << "a CUDA device is present";
  const Schedule s = make(workload::OpKind::gemm_rs, 2, kSequential);
  LonelyGroup group(2);
  auto p = ProcessPrepared::create(s, ProcessRunOptions{}, group);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.error().message.rfind("no CUDA device found", 0), 0u) << p.error().message;
  // Bad input is reported before looking for a device.
  LonelyGroup three(3);
  auto bad = ProcessPrepared::create(s, ProcessRunOptions{}, three);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("3 processes"), std::string::npos);
}

}  // namespace
}  // namespace compass::backends::cuda
