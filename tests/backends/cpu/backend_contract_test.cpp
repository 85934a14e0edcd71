// The CPU backend under the shared backend contract: check, prepare, run, and the shared
// measurement (times summarised, check against the FP64 reference).

#include "compass/backends/cpu/backend.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "compass/schedule/generate.hpp"

namespace compass::backends {
namespace {

TEST(BackendContract, SummariseTimes) {
  Measurement m;
  m.times_s = {3.0, 1.0, 2.0, 10.0};
  summarise_times(m);
  EXPECT_EQ(m.min_s, 1.0);
  EXPECT_EQ(m.max_s, 10.0);
  EXPECT_EQ(m.median_s, 2.5);
  m.times_s = {4.0, 1.0, 2.0};
  summarise_times(m);
  EXPECT_EQ(m.median_s, 2.0);
}

TEST(BackendContract, OneRuleForTheOutputError) {
  EXPECT_EQ(relative_error(1e-6, 2.0), 5e-7);
  EXPECT_EQ(relative_error(3e-6, 0.0), 3e-6);  // an all-zero reference: the absolute error
  EXPECT_TRUE(std::isinf(relative_error(std::numeric_limits<double>::quiet_NaN(), 1.0)));
  EXPECT_TRUE(std::isinf(relative_error(std::numeric_limits<double>::infinity(), 1.0)));
}

TEST(BackendContract, ACheckFoldsComparisonsAndJudgesByTheRule) {
  CheckResult c;
  EXPECT_FALSE(c.checked);
  c.add(1e-6, 2.0);   // one rank
  c.add(4e-6, 1.0);   // another: the largest error over the largest magnitude
  EXPECT_EQ(c.max_abs_error, 4e-6);
  EXPECT_EQ(c.max_ref_abs, 2.0);
  EXPECT_EQ(c.max_rel_error, relative_error(4e-6, 2.0));
  c.judge(1e-6);
  EXPECT_TRUE(c.checked);
  EXPECT_FALSE(c.passed);
  c.judge(2e-6);
  EXPECT_TRUE(c.passed);
  c.add(std::numeric_limits<double>::quiet_NaN(), 1.0);  // a NaN output fails every tolerance
  c.judge(1e30);
  EXPECT_FALSE(c.passed);
}

TEST(BackendContract, OptionsAreChecked) {
  RunOptions o;
  EXPECT_TRUE(check_options(o).ok());
  o.repeat = 0;
  EXPECT_NE(check_options(o).error().message.find("repeat"), std::string::npos);
  o = RunOptions{};
  o.warmup = -1;
  EXPECT_NE(check_options(o).error().message.find("warmup"), std::string::npos);
}

workload::OperatorSpec small_op() {
  workload::OperatorSpec op;
  op.kind = workload::OpKind::gemm_rs;
  op.m = 64;
  op.n = 32;
  op.k = 48;
  op.tp = 4;
  op.dtype = DType::fp32;
  return op;
}

TEST(CpuBackend, CheckPrepareRunMeasuresAndChecks) {
  const auto op = small_op();
  auto s = schedule::generate(op, schedule::Strategy{schedule::StrategyKind::fuse_ring, 0},
                              schedule::default_comm_plan(op.tp));
  ASSERT_TRUE(s.ok()) << s.error().message;
  ASSERT_TRUE(cpu::check(*s).ok());
  RunOptions o;
  o.repeat = 3;
  o.check = true;
  auto inputs = cpu::make_inputs(op, o, cpu::Workspace::bytes_needed(*s));
  ASSERT_TRUE(inputs.ok()) << inputs.error().message;
  auto prepared = cpu::Prepared::create(*s, *inputs);
  ASSERT_TRUE(prepared.ok()) << prepared.error().message;
  for (int twice = 0; twice < 2; ++twice) {  // run is repeatable on one preparation
    auto m = prepared->run(o);
    ASSERT_TRUE(m.ok()) << m.error().message;
    EXPECT_EQ(m->times_s.size(), 3u);
    EXPECT_LE(m->min_s, m->median_s);
    EXPECT_LE(m->median_s, m->max_s);
    EXPECT_TRUE(m->check.checked);
    EXPECT_TRUE(m->check.passed) << m->check.max_rel_error;
    EXPECT_LE(m->check.max_rel_error, cpu::kCheckTolerance);
    EXPECT_GT(m->check.max_ref_abs, 0);
    EXPECT_EQ(m->threads, 2 * op.tp);  // per rank: its compute stream and copy engine 0
  }
}

TEST(CpuBackend, CheckRejectsABrokenSchedule) {
  const auto op = small_op();
  auto s = schedule::generate(op, schedule::Strategy{}, schedule::default_comm_plan(op.tp));
  ASSERT_TRUE(s.ok());
  s->tasks.back().deps.push_back(static_cast<int>(s->tasks.size()) + 5);
  EXPECT_FALSE(cpu::check(*s).ok());
}

}  // namespace
}  // namespace compass::backends
