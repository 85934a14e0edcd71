// Hand-computed cases for the component models (GEMM, transfer, ring collective).

#include <gtest/gtest.h>

#include "compass/hardware/presets.hpp"
#include "compass/model/comm_model.hpp"
#include "compass/hardware/gemm_cost.hpp"
#include "test_helpers.hpp"

namespace compass::model {
namespace {

using hardware::gemm_compute_s;
using hardware::gemm_roofline;
using hardware::gemm_time_s;
using hardware::GemmRoofline;
using hardware::kDefaultGemmEfficiency;
using hardware::kTileKOverhead;
using hardware::large_gemm_efficiency;
using hardware::peak_flops;

using testing::uniform_switch;

TEST(GemmModel, TilesExactlyFillTheSms) {
  const hardware::Profile p = uniform_switch(2);  // 4 SMs, 1e12 peak, efficiency 0.5
  // 256 x 256 output = 4 tiles of 128 x 128 = one full wave. K + 64 = 512.
  const GemmRoofline r = gemm_roofline(p, 256, 256, 448, DType::bf16);
  EXPECT_EQ(r.tiles, 4);
  EXPECT_EQ(r.waves, 1);
  EXPECT_DOUBLE_EQ(r.wave_efficiency, 1.0);
  const double tile_s = 2.0 * 128 * 128 * 512 / (1e12 * 0.5 / 4);  // 134.2 us
  EXPECT_NEAR(r.compute_s, tile_s, 1e-12);
  EXPECT_NEAR(gemm_time_s(p, 256, 256, 448, DType::bf16), tile_s + 5e-6, 1e-12);
  EXPECT_NEAR(gemm_compute_s(p, 256, 256, 448, DType::bf16), tile_s, 1e-12);
}

TEST(GemmModel, PartialWaveCostsAFullWave) {
  const hardware::Profile p = uniform_switch(2);
  // 6 tiles on 4 SMs: 2 waves, 75% of the SM-time used.
  const GemmRoofline r = gemm_roofline(p, 384, 256, 448, DType::bf16);
  EXPECT_EQ(r.tiles, 6);
  EXPECT_EQ(r.waves, 2);
  EXPECT_DOUBLE_EQ(r.wave_efficiency, 0.75);
  EXPECT_NEAR(r.compute_s, 2 * gemm_roofline(p, 256, 256, 448, DType::bf16).compute_s, 1e-12);
  // A row count that is not a multiple of the tile still pays for whole tiles.
  EXPECT_DOUBLE_EQ(gemm_roofline(p, 129, 256, 448, DType::bf16).compute_s,
                   gemm_roofline(p, 256, 256, 448, DType::bf16).compute_s);
}

TEST(GemmModel, SmallKIsLessEfficient) {
  const hardware::Profile p = uniform_switch(2);
  const GemmRoofline small = gemm_roofline(p, 256, 256, 64, DType::bf16);
  EXPECT_DOUBLE_EQ(small.k_efficiency, 0.5);
  const GemmRoofline big = gemm_roofline(p, 256, 256, 8192, DType::bf16);
  EXPECT_GT(big.k_efficiency, 0.99);
}

TEST(GemmModel, MemoryBoundWhenBandwidthIsLow) {
  hardware::Profile p = uniform_switch(2);
  p.devices[0].memory_bandwidth_bytes_per_s = 1e9;
  const GemmRoofline r = gemm_roofline(p, 256, 256, 448, DType::bf16);
  const double bytes = (256.0 * 448 + 448.0 * 256 + 256.0 * 256) * 2;
  EXPECT_NEAR(r.memory_s, bytes / 1e9, 1e-15);
  EXPECT_DOUBLE_EQ(r.time_s, r.memory_s);
}

TEST(GemmModel, CalibrationTableWinsAndInterpolates) {
  hardware::Profile p = uniform_switch(2);
  p.calibration.gemm.push_back({DType::bf16, 1024, 1024, 1024, 100e-6});
  p.calibration.gemm.push_back({DType::bf16, 4096, 4096, 4096, 2e-3});
  // A sample's own shape returns its time.
  EXPECT_NEAR(gemm_time_s(p, 1024, 1024, 1024, DType::bf16), 100e-6, 1e-12);
  EXPECT_NEAR(gemm_time_s(p, 4096, 4096, 4096, DType::bf16), 2e-3, 1e-12);
  // Between samples the achieved FLOP/s lies between theirs.
  const double t = gemm_time_s(p, 2048, 2048, 2048, DType::bf16);
  const double rate = 2.0 * 2048 * 2048 * 2048 / t;
  const double r1 = 2.0 * 1024 * 1024 * 1024 / 100e-6, r2 = 2.0 * 4096 * 4096 * 4096 / 2e-3;
  EXPECT_GT(rate, std::min(r1, r2));
  EXPECT_LT(rate, std::max(r1, r2));
  // Another dtype has no samples: the roofline answers (from that dtype's own peak).
  p.devices[0].peak_flops[DType::fp16] = 2e12;
  EXPECT_NEAR(gemm_time_s(p, 256, 256, 448, DType::fp16),
              gemm_roofline(p, 256, 256, 448, DType::fp16).time_s + 5e-6, 1e-12);
}

TEST(GemmModel, PresetIsSane) {
  const Result<hardware::Profile> p = hardware::make_preset("a6000x8");
  ASSERT_TRUE(p.ok()) << p.error().message;
  // A large GEMM runs near the calibrated large-GEMM rate.
  const double t = gemm_time_s(*p, 8192, 8192, 8192, DType::bf16);
  const double rate = 2.0 * 8192 * 8192 * 8192 / t;
  EXPECT_GT(rate, 0.8 * large_gemm_efficiency(*p) * peak_flops(*p, DType::bf16));
  EXPECT_LE(rate, large_gemm_efficiency(*p) * peak_flops(*p, DType::bf16));
}

TEST(CommModel, SingleTransfer) {
  const hardware::Profile p = uniform_switch(4, 10e9, 1e-6);
  // Two hops (gpu0 -> switch -> gpu1): 2 us latency + 1 MB / 10 GB/s.
  EXPECT_NEAR(transfer_time_s(p, 0, 1, 1e6), 2e-6 + 1e-4, 1e-12);
  EXPECT_EQ(transfer_time_s(p, 2, 2, 1e6), 0.0);
}

TEST(CommModel, RingCollectiveOnUniformSwitch) {
  const hardware::Profile p = uniform_switch(4, 10e9, 1e-6);
  const std::vector<int> ring{0, 1, 2, 3};
  // Each step every GPU sends 1 MB up its own link and receives 1 MB down it: no sharing.
  const StepTime st = ring_step_time(p, ring, 1e6);
  EXPECT_NEAR(st.time_s, 2e-6 + 1e-4, 1e-12);
  const double launch = p.overheads.collective_launch_s;
  EXPECT_NEAR(ring_collective_time_s(p, ring, 4e6, Collective::all_gather), 3 * (2e-6 + 1e-4) + launch,
              1e-12);
  EXPECT_NEAR(ring_collective_time_s(p, ring, 4e6, Collective::all_reduce),
              6 * (2e-6 + 1e-4) + launch, 1e-12);
  // A double ring with half a block each way loads every link direction with 2 halves.
  EXPECT_NEAR(double_ring_step_time(p, ring, {3, 2, 1, 0}, 0.5e6).time_s, 2e-6 + 1e-4, 1e-12);
}

TEST(CommModel, SharedLinkHalvesTheRate) {
  const hardware::Profile p = uniform_switch(4, 10e9, 0.0);
  // Two flows into GPU 3 share its downlink.
  const StepTime st = concurrent_flows_time(p, {{0, 3, 1e6}, {1, 3, 1e6}});
  EXPECT_NEAR(st.time_s, 2e-4, 1e-12);
}

TEST(CommModel, ReleasedAndChainedFlows) {
  const hardware::Profile p = uniform_switch(4, 10e9, 0.0);
  // Flow 1 starts at 50 us and shares GPU 3's downlink with flow 0 from then on.
  std::vector<TimedFlow> flows{{0, 3, 1e6, 0.0}, {1, 3, 1e6, 50e-6}};
  Caches caches;
  std::vector<double> fin = run_released_flows(p, flows, caches);
  // Flow 0: 0.5 MB alone (50 us), then 0.5 MB at half rate (100 us) -> 150 us.
  EXPECT_NEAR(fin[0], 150e-6, 1e-12);
  // Flow 1: 0.5 MB at half rate until 150 us, then 0.5 MB alone -> 200 us.
  EXPECT_NEAR(fin[1], 200e-6, 1e-12);
  // Chained on one engine: the second starts 3 us after the first ends.
  flows = {{0, 1, 1e6, 0.0}, {0, 2, 1e6, 0.0, 0, 3e-6}};
  fin = run_released_flows(p, flows, caches);
  EXPECT_NEAR(fin[0], 100e-6, 1e-12);
  EXPECT_NEAR(fin[1], 203e-6, 1e-12);
  // Behind two flows (its engine's and its data's): it starts 3 us after the later one ends.
  flows = {{0, 1, 1e6, 0.0}, {2, 3, 2e6, 0.0}, {0, 2, 1e6, 0.0, 0, 3e-6, 1}};
  fin = run_released_flows(p, flows, caches);
  EXPECT_NEAR(fin[0], 100e-6, 1e-12);
  EXPECT_NEAR(fin[1], 200e-6, 1e-12);
  EXPECT_NEAR(fin[2], 303e-6, 1e-12);
  // The same with the data flow the earlier one: the engine's flow decides.
  flows = {{0, 1, 2e6, 0.0}, {2, 3, 1e6, 0.0}, {0, 2, 1e6, 0.0, 0, 3e-6, 1}};
  fin = run_released_flows(p, flows, caches);
  EXPECT_NEAR(fin[2], 303e-6, 1e-12);
}

TEST(CommModel, LatencyFirstFlowsShareAfterTheirOwnLatency) {
  hardware::Profile p = uniform_switch(4, 10e9, 0.0);
  p.links[1].latency_s = 50e-6;  // GPU 1's link: 50 us more on every route through it
  ASSERT_DOUBLE_EQ(p.route_latency_s(1, 3), 50e-6);
  ASSERT_DOUBLE_EQ(p.route_latency_s(0, 3), 0.0);
  const std::vector<TimedFlow> flows{{0, 3, 1e6}, {1, 3, 1e6}};
  Caches caches;
  EXPECT_FALSE(same_latencies(p, flows));
  // Latency first: flow 1 joins GPU 3's downlink at 50 us, as in ReleasedAndChainedFlows:
  // flow 0 ends at 150 us, flow 1 at 200 us with its last byte.
  const std::vector<double> first = latency_first_flows(p, flows, caches);
  EXPECT_NEAR(first[0], 150e-6, 1e-12);
  EXPECT_NEAR(first[1], 200e-6, 1e-12);
  // Latency after the bytes (run_released_flows): both share from 0 and end their bytes at
  // 200 us; flow 1 lands 50 us later.
  const std::vector<double> after = run_released_flows(p, flows, caches);
  EXPECT_NEAR(after[0], 200e-6, 1e-12);
  EXPECT_NEAR(after[1], 250e-6, 1e-12);
  // Asked again, the same answer (from the cache).
  EXPECT_EQ(latency_first_flows(p, flows, caches), first);
  // With one latency everywhere the order only shifts every flow alike: the scaled run.
  const hardware::Profile q = uniform_switch(4, 10e9, 2e-6);
  EXPECT_TRUE(same_latencies(q, flows));
  const std::vector<double> shifted = latency_first_flows(q, flows, caches);
  EXPECT_NEAR(shifted[0], 4e-6 + 200e-6, 1e-12);
  EXPECT_NEAR(shifted[1], 4e-6 + 200e-6, 1e-12);
}

}  // namespace
}  // namespace compass::model
