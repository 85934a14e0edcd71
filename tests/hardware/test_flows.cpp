// Max-min flow sharing: hand-computed rates and finish times on small hand-built topologies.

#include <gtest/gtest.h>

#include <cmath>

#include "compass/hardware/flows.hpp"

namespace compass::hardware {
namespace {

constexpr double kGB = 1e9;

// A chain of GPUs gpu0 - gpu1 - ... joined by direct links; link i joins gpu i and gpu i+1
// with `fwd_bw[i]` in the i->i+1 direction and `rev_bw[i]` back. Routes follow the chain.
Profile chain(const std::vector<double>& fwd_bw, const std::vector<double>& rev_bw,
              double latency_s) {
  Profile p;
  p.name = "chain";
  DeviceSpec dev;
  dev.name = "test-gpu";
  p.devices.push_back(dev);
  const int n = static_cast<int>(fwd_bw.size()) + 1;
  for (int i = 0; i < n; ++i)
    p.nodes.push_back(Node{"gpu" + std::to_string(i), NodeKind::gpu, "test-gpu"});
  for (int i = 0; i + 1 < n; ++i) {
    Link l;
    l.name = "l" + std::to_string(i);
    l.kind = LinkKind::nvlink;
    l.a = i;
    l.b = i + 1;
    l.bandwidth_bytes_per_s = fwd_bw[i];
    l.reverse_bandwidth_bytes_per_s = rev_bw[i];
    l.latency_s = latency_s;
    p.links.push_back(l);
  }
  for (int s = 0; s < n; ++s)
    for (int d = 0; d < n; ++d) {
      if (s == d) continue;
      Route r{s, d, {}};
      if (s < d)
        for (int i = s; i < d; ++i) r.hops.push_back(Hop{i, true});
      else
        for (int i = s - 1; i >= d; --i) r.hops.push_back(Hop{i, false});
      p.routes.push_back(r);
    }
  return p;
}

TEST(Flows, OneFlowTakesLatencyPlusBytesOverBandwidth) {
  Profile p = chain({10 * kGB}, {10 * kGB}, 2e-6);
  FlowOutcome o = run_flows(p, {Flow{0, 1, 5 * kGB}});
  ASSERT_EQ(o.finish_s.size(), 1u);
  EXPECT_DOUBLE_EQ(o.finish_s[0], 2e-6 + 0.5);
  EXPECT_DOUBLE_EQ(o.makespan_s, 2e-6 + 0.5);
  ASSERT_EQ(o.loads.size(), 1u);
  EXPECT_EQ(o.loads[0].hop, (Hop{0, true}));
  EXPECT_EQ(o.loads[0].name, p.hop_name(Hop{0, true}));
  EXPECT_DOUBLE_EQ(o.loads[0].bytes, 5 * kGB);
  EXPECT_EQ(o.loads[0].flows, 1);
  EXPECT_DOUBLE_EQ(o.loads[0].busy_s, 0.5);
}

TEST(Flows, LatencyCountsOncePerRouteNotPerEvent) {
  // Two hops of 3 us each; the route latency (6 us) is added once at the end.
  Profile p = chain({10 * kGB, 10 * kGB}, {10 * kGB, 10 * kGB}, 3e-6);
  FlowOutcome o = run_flows(p, {Flow{0, 2, 1 * kGB}, Flow{1, 2, 1 * kGB}});
  // Both share l1 forward: 5 GB/s each until both finish together at 0.2 s.
  EXPECT_DOUBLE_EQ(o.finish_s[0], 0.2 + 6e-6);
  EXPECT_DOUBLE_EQ(o.finish_s[1], 0.2 + 3e-6);
}

TEST(Flows, TwoFlowsOnOneDirectionGetHalfEach) {
  Profile p = chain({10 * kGB}, {10 * kGB}, 0);
  std::vector<Flow> flows{{0, 1, 4 * kGB}, {0, 1, 4 * kGB}};
  std::vector<double> rates = maxmin_rates(p, flows);
  EXPECT_DOUBLE_EQ(rates[0], 5 * kGB);
  EXPECT_DOUBLE_EQ(rates[1], 5 * kGB);
  FlowOutcome o = run_flows(p, flows);
  EXPECT_DOUBLE_EQ(o.finish_s[0], 0.8);
  EXPECT_DOUBLE_EQ(o.finish_s[1], 0.8);
  ASSERT_EQ(o.loads.size(), 1u);
  EXPECT_EQ(o.loads[0].flows, 2);
  EXPECT_DOUBLE_EQ(o.loads[0].bytes, 8 * kGB);
}

TEST(Flows, ShorterFlowFinishingReleasesBandwidth) {
  Profile p = chain({10 * kGB}, {10 * kGB}, 0);
  // 5 GB/s each until the 1 GB flow ends at 0.2 s; the other then has 2 GB left at 10 GB/s.
  FlowOutcome o = run_flows(p, {Flow{0, 1, 1 * kGB}, Flow{0, 1, 3 * kGB}});
  EXPECT_DOUBLE_EQ(o.finish_s[0], 0.2);
  EXPECT_NEAR(o.finish_s[1], 0.4, 1e-12);
}

TEST(Flows, OppositeDirectionsDoNotInterfere) {
  Profile p = chain({10 * kGB}, {4 * kGB}, 0);
  std::vector<Flow> flows{{0, 1, 2 * kGB}, {1, 0, 2 * kGB}};
  std::vector<double> rates = maxmin_rates(p, flows);
  EXPECT_DOUBLE_EQ(rates[0], 10 * kGB);
  EXPECT_DOUBLE_EQ(rates[1], 4 * kGB);
  FlowOutcome o = run_flows(p, flows);
  EXPECT_DOUBLE_EQ(o.finish_s[0], 0.2);
  EXPECT_DOUBLE_EQ(o.finish_s[1], 0.5);
  // Heaviest busy_s first: the slow reverse direction.
  ASSERT_EQ(o.loads.size(), 2u);
  EXPECT_EQ(o.loads[0].hop, (Hop{0, false}));
  EXPECT_EQ(o.loads[1].hop, (Hop{0, true}));
}

TEST(Flows, WaterFillingWithDifferentBottlenecks) {
  // gpu0 -l0(10)- gpu1 -l1(4)- gpu2. f0: 0->2 crosses l0 and l1; f1: 1->2 crosses l1;
  // f2: 0->1 crosses l0. l1 is the tightest: f0 and f1 get 4/2 = 2 GB/s; l0 keeps 10 - 2 = 8
  // GB/s for f2. At t = 1 s f1 (2 GB) and f2 (8 GB) are done; f0 has 8 - 2 = 6 GB left and
  // l1 to itself at 4 GB/s: it ends at 1 + 1.5 = 2.5 s.
  Profile p = chain({10 * kGB, 4 * kGB}, {10 * kGB, 4 * kGB}, 0);
  std::vector<Flow> flows{{0, 2, 8 * kGB}, {1, 2, 2 * kGB}, {0, 1, 8 * kGB}};
  std::vector<double> rates = maxmin_rates(p, flows);
  EXPECT_DOUBLE_EQ(rates[0], 2 * kGB);
  EXPECT_DOUBLE_EQ(rates[1], 2 * kGB);
  EXPECT_DOUBLE_EQ(rates[2], 8 * kGB);
  FlowOutcome o = run_flows(p, flows);
  EXPECT_NEAR(o.finish_s[0], 2.5, 1e-12);
  EXPECT_NEAR(o.finish_s[1], 1.0, 1e-12);
  EXPECT_NEAR(o.finish_s[2], 1.0, 1e-12);
  EXPECT_NEAR(o.makespan_s, 2.5, 1e-12);
  // l1 forward: 10 GB over 4 GB/s = 2.5 s; l0 forward: 16 GB over 10 GB/s = 1.6 s.
  ASSERT_EQ(o.loads.size(), 2u);
  EXPECT_EQ(o.loads[0].hop, (Hop{1, true}));
  EXPECT_DOUBLE_EQ(o.loads[0].busy_s, 2.5);
  EXPECT_EQ(o.loads[0].flows, 2);
  EXPECT_EQ(o.loads[1].hop, (Hop{0, true}));
  EXPECT_DOUBLE_EQ(o.loads[1].busy_s, 1.6);
}

TEST(Flows, ZeroByteAndSelfFlowsAreFreeAndLoadNothing) {
  Profile p = chain({10 * kGB}, {10 * kGB}, 1e-6);
  std::vector<Flow> flows{{0, 0, 5 * kGB}, {0, 1, 0}, {1, 0, 1 * kGB}};
  std::vector<double> rates = maxmin_rates(p, flows);
  EXPECT_EQ(rates[0], 0);
  EXPECT_EQ(rates[1], 0);
  EXPECT_DOUBLE_EQ(rates[2], 10 * kGB);
  FlowOutcome o = run_flows(p, flows);
  EXPECT_EQ(o.finish_s[0], 0);
  EXPECT_EQ(o.finish_s[1], 0);
  EXPECT_DOUBLE_EQ(o.finish_s[2], 0.1 + 1e-6);
  ASSERT_EQ(o.loads.size(), 1u);
  EXPECT_EQ(o.loads[0].hop, (Hop{0, false}));
}

TEST(Flows, NoFlowsIsAnEmptyOutcome) {
  Profile p = chain({10 * kGB}, {10 * kGB}, 0);
  FlowOutcome o = run_flows(p, {});
  EXPECT_TRUE(o.finish_s.empty());
  EXPECT_EQ(o.makespan_s, 0);
  EXPECT_TRUE(o.loads.empty());
}

TEST(Flows, ResultsAreDeterministic) {
  Profile p = chain({10 * kGB, 4 * kGB, 7 * kGB}, {3 * kGB, 9 * kGB, 5 * kGB}, 1e-6);
  std::vector<Flow> flows;
  for (int s = 0; s < 4; ++s)
    for (int d = 0; d < 4; ++d)
      if (s != d) flows.push_back(Flow{s, d, (1 + s + 2 * d) * 0.1 * kGB});
  FlowOutcome a = run_flows(p, flows);
  FlowOutcome b = run_flows(p, flows);
  EXPECT_EQ(a.finish_s, b.finish_s);
  ASSERT_EQ(a.loads.size(), b.loads.size());
  for (std::size_t i = 0; i < a.loads.size(); ++i) {
    EXPECT_EQ(a.loads[i].hop, b.loads[i].hop);
    EXPECT_EQ(a.loads[i].busy_s, b.loads[i].busy_s);
  }
  // Every flow finishes no earlier than its bytes over its route bandwidth.
  for (std::size_t f = 0; f < flows.size(); ++f)
    EXPECT_GE(a.finish_s[f] * (1 + 1e-12),
              flows[f].bytes / p.route_bandwidth(flows[f].src, flows[f].dst));
}

TEST(Flows, RouteDirectionsAppendAfterWhatIsThere) {
  const Profile p = chain({kGB, kGB, kGB}, {kGB, kGB, kGB}, 0.0);
  std::vector<int> out{99};
  sharing::append_route_dirs(p, 0, 3, out);
  sharing::append_route_dirs(p, 2, 2, out);  // the same GPU: nothing
  sharing::append_route_dirs(p, 3, 1, out);
  std::vector<int> want{99};
  for (const std::vector<int>& d : {sharing::route_dirs(p, 0, 3), sharing::route_dirs(p, 3, 1)})
    want.insert(want.end(), d.begin(), d.end());
  EXPECT_EQ(out, want);
  // 0 -> 3 crosses the three links forward (ids 0, 2, 4), 3 -> 1 two links backward (5, 3).
  EXPECT_EQ(out, (std::vector<int>{99, 0, 2, 4, 3, 5}));
}

}  // namespace
}  // namespace compass::hardware
