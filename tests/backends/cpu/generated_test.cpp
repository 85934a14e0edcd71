// The CPU executor on the schedules the generators produce: every operator x strategy x
// p in {1, 2, 3, 4, 8} x small shapes (odd N and K included) matches the FP64 reference, with
// the default comm plan and with the topology-aware plan of the a6000x8 preset, and repeated
// runs are bit-identical.

#include <gtest/gtest.h>

#include <string>
#include <tuple>

#include "compass/backends/cpu/executor.hpp"
#include "compass/hardware/presets.hpp"
#include "compass/hardware/random_topology.hpp"
#include "compass/schedule/generate.hpp"

namespace compass::backends::cpu {
namespace {

using schedule::Strategy;
using schedule::StrategyKind;
using workload::OperatorSpec;
using workload::OpKind;

// Small shapes satisfying each operator's divisibility, with M/p divisible by 4 so that
// decompose:4 is feasible; `big` picks a second, less regular shape.
OperatorSpec shape(OpKind kind, int p, bool big) {
  OperatorSpec op;
  op.kind = kind;
  op.tp = p;
  op.dtype = DType::bf16;
  switch (kind) {
    case OpKind::ag_gemm:  // N/p odd, K odd
      op.m = p * (big ? 12 : 4);
      op.n = p * (big ? 7 : 3);
      op.k = big ? 33 : 7;
      break;
    case OpKind::gemm_rs:  // N odd, K/p odd
      op.m = p * (big ? 12 : 4);
      op.n = big ? 17 : 9;
      op.k = p * (big ? 11 : 3);
      break;
    case OpKind::gemm_ar:
      op.m = p * (big ? 12 : 4);
      op.n = big ? 13 : 5;
      op.k = p * (big ? 9 : 5);
      break;
  }
  return op;
}

const Strategy kStrategies[] = {
    {StrategyKind::sequential, 0},       {StrategyKind::decompose, 1},
    {StrategyKind::decompose, 2},        {StrategyKind::decompose, 4},
    {StrategyKind::fuse_all2all, 0},     {StrategyKind::fuse_ring, 0},
    {StrategyKind::fuse_double_ring, 0}, {StrategyKind::fuse_hier, 0},
    {StrategyKind::fuse_synth, 0},
};

using Param = std::tuple<OpKind, int /*p*/>;

class Generated : public ::testing::TestWithParam<Param> {};

void check_all(const OperatorSpec& op, const schedule::CommPlan& plan, const std::string& what,
               const schedule::GenerateOptions& options = {}) {
  auto data = make_operator_data(op, 1234);
  ASSERT_TRUE(data.ok()) << data.error().message;
  auto ref = reference_output(*data);
  ASSERT_TRUE(ref.ok());
  for (const Strategy& st : kStrategies) {
    const std::string label =
        fmt::format("{} {} M={} N={} K={} p={} {}", what, workload::to_string(op.kind), op.m, op.n,
                    op.k, op.tp, schedule::to_string(st));
    if (st.kind == StrategyKind::decompose && !schedule::check_decompose(op, st.parts).ok())
      continue;  // uneven chunks: no decomposition exists
    auto s = schedule::generate(op, st, plan, options);
    ASSERT_TRUE(s.ok()) << label << ": " << s.error().message;
    auto ws = Workspace::create(*s, *data);
    ASSERT_TRUE(ws.ok()) << label << ": " << ws.error().message;
    auto stats = run(*s, *ws);
    ASSERT_TRUE(stats.ok()) << label << ": " << stats.error().message;
    const ErrorStats err = compare_outputs(*s, *ws, *ref);
    EXPECT_LE(err.max_rel_error, kCheckTolerance)
        << label << ": max abs " << err.max_abs_error << " max |ref| " << err.max_ref_abs;
    EXPECT_GT(err.max_ref_abs, 0.0) << label;
  }
}

TEST_P(Generated, EveryStrategyMatchesTheReference) {
  const auto [kind, p] = GetParam();
  for (bool big : {false, true})
    check_all(shape(kind, p, big), schedule::default_comm_plan(p), "default plan");
}

TEST_P(Generated, TopologyAwarePlanMatchesTheReference) {
  const auto [kind, p] = GetParam();
  auto profile = hardware::make_preset("a6000x8");
  ASSERT_TRUE(profile.ok()) << profile.error().message;
  std::vector<int> gpus;
  for (int g = 0; g < p; ++g) gpus.push_back(g);
  auto plan = schedule::comm_plan_for(*profile, gpus);
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  check_all(shape(kind, p, false), *plan, "a6000x8 plan");
}

// Fused GEMM groups run here chunk by chunk; every strategy still matches the reference, with
// the default and the topology-aware plan and with uneven chunks (gemm_ar, p not dividing M).
TEST_P(Generated, FusedGemmGroupsMatchTheReference) {
  const auto [kind, p] = GetParam();
  const schedule::GenerateOptions fused{true};
  for (bool big : {false, true})
    check_all(shape(kind, p, big), schedule::default_comm_plan(p), "fused groups", fused);
  auto profile = hardware::make_preset("a6000x8");
  ASSERT_TRUE(profile.ok()) << profile.error().message;
  std::vector<int> gpus;
  for (int g = 0; g < p; ++g) gpus.push_back(g);
  auto plan = schedule::comm_plan_for(*profile, gpus);
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  check_all(shape(kind, p, false), *plan, "fused groups, a6000x8 plan", fused);
  if (kind == OpKind::gemm_ar && p > 1) {
    OperatorSpec odd = shape(kind, p, false);
    odd.m += 1;
    check_all(odd, schedule::default_comm_plan(p), "fused groups, uneven chunks", fused);
  }
}

// Fused GEMM groups run here as their chunk GEMMs: AG-GEMM gives the same bits as the plain
// schedule. GEMM-RS / GEMM-AR take the fused kernel's form (partials into "part", stored into
// the owners' slots, summed in rank order), so only the reference check above applies to their
// values; here their structure is checked.
TEST_P(Generated, FusedGemmGroupsRunChunkByChunkWithTheSameBits) {
  const auto [kind, p] = GetParam();
  const OperatorSpec op = shape(kind, p, true);
  auto data = make_operator_data(op, 7);
  ASSERT_TRUE(data.ok());
  for (const Strategy& st : kStrategies) {
    const auto plan = schedule::default_comm_plan(p);
    auto plain = schedule::generate(op, st, plan);
    auto fused = schedule::generate(op, st, plan, schedule::GenerateOptions{true});
    ASSERT_TRUE(plain.ok() && fused.ok());
    const bool grouped =
        p > 1 && (st.kind == StrategyKind::fuse_all2all || st.kind == StrategyKind::fuse_ring ||
                  st.kind == StrategyKind::fuse_double_ring);
    const bool ag = kind == OpKind::ag_gemm;
    int in_group = 0;
    for (const auto& t : fused->tasks) {
      if (t.kind != schedule::TaskKind::gemm) {
        EXPECT_EQ(t.fused, -1);
        continue;
      }
      EXPECT_EQ(t.fused, grouped ? 0 : -1) << t.name;
      if (t.fused == 0) {
        ++in_group;
        EXPECT_EQ(fused->buffers[static_cast<std::size_t>(t.src.buffer)].name, ag ? "xg" : "x")
            << t.name;
        if (!ag) {
          EXPECT_EQ(fused->buffers[static_cast<std::size_t>(t.dst.buffer)].name, "part") << t.name;
        }
      }
    }
    if (!grouped) {
      EXPECT_EQ(*plain, *fused) << schedule::to_string(st);
      continue;
    }
    EXPECT_GE(in_group, p * p) << schedule::to_string(st);
    if (!ag) continue;
    auto a = Workspace::create(*plain, *data);
    auto b = Workspace::create(*fused, *data);
    ASSERT_TRUE(a.ok() && b.ok());
    ASSERT_TRUE(run(*plain, *a).ok());
    ASSERT_TRUE(run(*fused, *b).ok());
    for (int r = 0; r < p; ++r)
      ASSERT_EQ(a->buffers()[static_cast<std::size_t>(a->output_buffer(r))],
                b->buffers()[static_cast<std::size_t>(b->output_buffer(r))])
          << schedule::to_string(st) << " rank " << r;
  }
}

// The owner sums the partials in rank order whatever order they were computed and arrived
// in: the fused all-to-all and the fused ring (same chunk GEMMs, other orders) give the same
// bits, where the plain schedules sum in their own orders.
TEST_P(Generated, FusedGemmRsSumsInRankOrder) {
  const auto [kind, p] = GetParam();
  if (kind == OpKind::ag_gemm || p < 2) GTEST_SKIP() << "GEMM-RS / GEMM-AR at p >= 2 only";
  const OperatorSpec op = shape(kind, p, true);
  auto data = make_operator_data(op, 11);
  ASSERT_TRUE(data.ok());
  const auto plan = schedule::default_comm_plan(p);
  std::vector<std::vector<std::vector<float>>> outs;
  for (StrategyKind k : {StrategyKind::fuse_all2all, StrategyKind::fuse_ring}) {
    auto s = schedule::generate(op, Strategy{k, 0}, plan, schedule::GenerateOptions{true});
    ASSERT_TRUE(s.ok()) << s.error().message;
    auto ws = Workspace::create(*s, *data);
    ASSERT_TRUE(ws.ok());
    ASSERT_TRUE(run(*s, *ws).ok());
    outs.emplace_back();
    for (int r = 0; r < p; ++r)
      outs.back().push_back(ws->buffers()[static_cast<std::size_t>(ws->output_buffer(r))]);
  }
  for (int r = 0; r < p; ++r)
    EXPECT_EQ(outs[0][static_cast<std::size_t>(r)], outs[1][static_cast<std::size_t>(r)])
        << "rank " << r;
}

// The tree patterns synthesised for other machines: every preset family and random machines
// (NVSwitch, one-root PCIe, PCIe chains, p2p off).
TEST_P(Generated, TreePatternsOfSeveralMachinesMatchTheReference) {
  const auto [kind, p] = GetParam();
  std::vector<std::pair<std::string, hardware::Profile>> machines;
  for (const char* name : {"h100x8", "rtx4090x8"}) {
    auto prof = hardware::make_preset(name);
    ASSERT_TRUE(prof.ok()) << prof.error().message;
    machines.emplace_back(name, *prof);
  }
  for (auto fam : {hardware::TopologyFamily::pcie_tree, hardware::TopologyFamily::one_root,
                   hardware::TopologyFamily::switch_chain, hardware::TopologyFamily::nvswitch,
                   hardware::TopologyFamily::staged})
    machines.emplace_back(std::string(hardware::to_string(fam)),
                          hardware::random_topology(77u + static_cast<unsigned>(p), p, fam));
  std::vector<int> gpus;
  for (int g = 0; g < p; ++g) gpus.push_back(g);
  const OperatorSpec op = shape(kind, p, true);
  auto data = make_operator_data(op, 4321);
  ASSERT_TRUE(data.ok()) << data.error().message;
  auto ref = reference_output(*data);
  ASSERT_TRUE(ref.ok());
  for (const auto& [name, prof] : machines) {
    auto plan = schedule::comm_plan_for(prof, gpus);
    ASSERT_TRUE(plan.ok()) << name << ": " << plan.error().message;
    for (StrategyKind k : {StrategyKind::fuse_hier, StrategyKind::fuse_synth}) {
      const std::string label = fmt::format("{} {} p={} {}", name, workload::to_string(op.kind),
                                            p, schedule::to_string(Strategy{k, 0}));
      auto s = schedule::generate_for(prof, op, Strategy{k, 0}, *plan);
      ASSERT_TRUE(s.ok()) << label << ": " << s.error().message;
      auto ws = Workspace::create(*s, *data);
      ASSERT_TRUE(ws.ok()) << label << ": " << ws.error().message;
      ASSERT_TRUE(run(*s, *ws).ok()) << label;
      const ErrorStats err = compare_outputs(*s, *ws, *ref);
      EXPECT_LE(err.max_rel_error, kCheckTolerance) << label;
      EXPECT_GT(err.max_ref_abs, 0.0) << label;
    }
  }
}

TEST_P(Generated, RepeatedRunsAreBitIdentical) {
  const auto [kind, p] = GetParam();
  const OperatorSpec op = shape(kind, p, true);
  auto data = make_operator_data(op, 99);
  ASSERT_TRUE(data.ok());
  for (const Strategy& st : kStrategies) {
    auto s = schedule::generate(op, st, schedule::default_comm_plan(p));
    ASSERT_TRUE(s.ok()) << s.error().message;
    auto a = Workspace::create(*s, *data);
    auto b = Workspace::create(*s, *data);
    ASSERT_TRUE(a.ok() && b.ok());
    ASSERT_TRUE(run(*s, *a).ok());
    for (int i = 0; i < 2; ++i) {
      b->reset(*data);
      ASSERT_TRUE(run(*s, *b).ok());
      for (int r = 0; r < p; ++r)
        ASSERT_EQ(a->buffers()[static_cast<std::size_t>(a->output_buffer(r))],
                  b->buffers()[static_cast<std::size_t>(b->output_buffer(r))])
            << schedule::to_string(st) << " rank " << r;
    }
  }
}

std::string param_name(const ::testing::TestParamInfo<Param>& info) {
  return fmt::format("{}_p{}", workload::to_string(std::get<0>(info.param)),
                     std::get<1>(info.param));
}

INSTANTIATE_TEST_SUITE_P(OpsAndRanks, Generated,
                         ::testing::Combine(::testing::Values(OpKind::ag_gemm, OpKind::gemm_rs,
                                                              OpKind::gemm_ar),
                                            ::testing::Values(1, 2, 3, 4, 8)),
                         param_name);

}  // namespace
}  // namespace compass::backends::cpu
