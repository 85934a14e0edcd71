// nccl-tests logs (published ones in tests/data/nccl, each naming its source) and the fit of a
// profile's links to them.

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "compass/hardware/gpu_models.hpp"
#include "compass/hardware/presets.hpp"
#include "compass/measure/topo_matrix.hpp"
#include "compass/measure/nccl_fit.hpp"
#include "../test_files.hpp"

namespace compass::measure {
namespace {

std::string data(const std::string& rel) { return compass::testing::test_data(rel); }

NcclLog log_of(const std::string& file) {
  auto l = parse_nccl_tests_log(data("nccl/" + file), file);
  EXPECT_TRUE(l.ok()) << (l.ok() ? "" : l.error().message);
  return l.ok() ? *l : NcclLog{};
}

hardware::Profile preset(const std::string& name) { return hardware::make_preset(name).value(); }

TEST(NcclLogs, PublishedLogsParse) {
  const NcclLog ar = log_of("all_reduce_4x4090.log");
  EXPECT_EQ(ar.test, NcclTest::all_reduce);
  EXPECT_EQ(ar.ranks, 4);
  EXPECT_EQ(ar.devices, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(ar.device_name, "NVIDIA GeForce RTX 4090");
  ASSERT_EQ(ar.rows.size(), 3u);
  EXPECT_DOUBLE_EQ(ar.rows[2].busbw[0], 25.95);
  EXPECT_DOUBLE_EQ(ar.rows[2].time_us[1], 62057);

  const NcclLog ag = log_of("all_gather_2gpu_nvlink.log");
  EXPECT_EQ(ag.test, NcclTest::all_gather);
  EXPECT_EQ(ag.ranks, 2);  // no rank lines: from busbw/algbw
  EXPECT_EQ(ag.rows.size(), 18u);

  const NcclLog h20 = log_of("all_reduce_8xh20.log");
  EXPECT_EQ(h20.test, NcclTest::all_reduce);
  EXPECT_EQ(h20.ranks, 8);
  EXPECT_EQ(h20.rows.size(), 15u);
}

void expect_fit_within(const hardware::Profile& p, const NcclLog& log, double tolerance) {
  auto fit = fit_to_nccl_tests(p, {log});
  ASSERT_TRUE(fit.ok()) << fit.error().message;
  const LogFit& f = fit->logs[0];
  EXPECT_TRUE(f.unexplained.empty()) << f.unexplained[0];
  int large = 0;
  for (const FitPoint& pt : f.points) {
    if (!pt.large) continue;
    ++large;
    EXPECT_NEAR(pt.after_busbw, pt.measured_busbw, tolerance * pt.measured_busbw)
        << log.origin << " size " << pt.size_bytes;
  }
  EXPECT_GE(large, 3);
  EXPECT_LE(f.large_max_error, tolerance);
  EXPECT_FALSE(fit->changes.empty());
  // The layout is kept: same nodes, links and routes.
  EXPECT_EQ(fit->profile.nodes, p.nodes);
  EXPECT_EQ(fit->profile.routes, p.routes);
  ASSERT_EQ(fit->profile.links.size(), p.links.size());
}

TEST(NcclFit, H20AllReduceOnAnNvswitchLayout) {
  expect_fit_within(preset("h100x8"), log_of("all_reduce_8xh20.log"), 0.10);
}

TEST(NcclFit, TwoGpuAllGatherOnAnNvswitchLayout) {
  expect_fit_within(preset("h100x8"), log_of("all_gather_2gpu_nvlink.log"), 0.10);
}

TEST(NcclFit, Rtx4090AllReduceOnAP2pPcieLayout) {
  // The log's machine published no matrix; the layout is the 8x RTX 4090 box of another
  // published matrix (p2p assumed on), whose GPUs 0-3 each sit on their own root complex.
  auto m = measure::parse_topo_matrix(data("topo/pcie_2socket_8x4090_sys.txt"), "m");
  ASSERT_TRUE(m.ok());
  auto p = measure::profile_from_topo(*m, *hardware::find_gpu_model("rtx4090"), {});
  ASSERT_TRUE(p.ok());
  expect_fit_within(*p, log_of("all_reduce_4x4090.log"), 0.10);
}

TEST(NcclFit, StagedLayoutCannotExplainTheRtx4090Log) {
  // rtx4090x8 stages every transfer through host memory and puts two GPUs behind one switch
  // uplink: 25.9 GB/s busbw would need that uplink above the PCIe 4.0 x16 peak.
  auto fit = fit_to_nccl_tests(preset("rtx4090x8"), {log_of("all_reduce_4x4090.log")});
  ASSERT_TRUE(fit.ok()) << fit.error().message;
  const LogFit& f = fit->logs[0];
  ASSERT_FALSE(f.unexplained.empty());
  EXPECT_NE(f.unexplained[0].find("above the PCIe 4.0 x16 peak 31.5"), std::string::npos) << f.unexplained[0];
  EXPECT_NE(f.unexplained[0].find("cannot explain"), std::string::npos);
  EXPECT_GT(f.large_max_error, 0.10);
}

TEST(NcclLogs, EveryTestKindIsRead) {
  // The 4090 log with its command line renamed (a constructed input, not a published log):
  // the test comes from the binary's name and busbw follows that test's factor.
  const std::string text = data("nccl/all_reduce_4x4090.log");
  for (auto [binary, test] : {std::pair{"all_gather_perf", NcclTest::all_gather},
                              std::pair{"reduce_scatter_perf", NcclTest::reduce_scatter},
                              std::pair{"sendrecv_perf", NcclTest::sendrecv}}) {
    std::string renamed = text;
    for (std::size_t at; (at = renamed.find("all_reduce_perf")) != std::string::npos;)
      renamed.replace(at, 15, binary);
    auto l = parse_nccl_tests_log(renamed, "x.log");
    ASSERT_TRUE(l.ok()) << l.error().message;
    EXPECT_EQ(l->test, test);
    EXPECT_EQ(l->ranks, 4);
    auto fit = fit_to_nccl_tests(preset("a6000x4"), {*l});
    ASSERT_TRUE(fit.ok()) << fit.error().message;
    EXPECT_EQ(fit->logs[0].points.size(), 3u);
  }
  EXPECT_DOUBLE_EQ(busbw_factor(NcclTest::all_reduce, 8), 1.75);
  EXPECT_DOUBLE_EQ(busbw_factor(NcclTest::reduce_scatter, 4), 0.75);
  EXPECT_DOUBLE_EQ(busbw_factor(NcclTest::sendrecv, 4), 1.0);
}

std::string parse_error(const std::string& text) {
  auto l = parse_nccl_tests_log(text, "x.log");
  return l.ok() ? std::string() : l.error().message;
}

TEST(NcclLogs, BadLogsAreOneClearError) {
  const std::string good = data("nccl/all_reduce_4x4090.log");
  EXPECT_TRUE(parse_error(good).empty());
  EXPECT_EQ(parse_error(""), "x.log: empty file (expected the output of an nccl-tests binary)");
  std::string wrong = good;
  wrong.replace(wrong.find("25.82      0"), 12, "25.82      3");
  EXPECT_EQ(parse_error(wrong),
            "x.log: line 17: size 536870912: #wrong is 3 (out-of-place): the run produced wrong "
            "results and cannot be fitted");
  EXPECT_EQ(parse_error(good + "# Out of bounds values : 2 FAILED\n"),
            "x.log: line 19: nccl-tests reports out-of-bounds values (FAILED): the results are wrong "
            "and cannot be fitted");
  EXPECT_EQ(parse_error(good + " Test NCCL failure common.cu:1005 'unhandled cuda error'\n").rfind(
                "x.log: line 19: the run failed ('Test NCCL failure", 0),
            0u);
  std::string truncated = good.substr(0, good.rfind("62077") + 5) + "\n";
  EXPECT_EQ(parse_error(truncated), "x.log: line 18: truncated row: 6 of 13 columns");
  EXPECT_EQ(parse_error("just some text\n").rfind("x.log: no result rows", 0), 0u);
  std::string broadcast = "./build/broadcast_perf -b 8 -e 128M\n";
  EXPECT_EQ(parse_error(broadcast + good.substr(good.find("#  Rank"))).rfind("x.log: a broadcast_perf log", 0), 0u);
}

TEST(NcclFit, MultiHostAndTooManyRanksAreErrors) {
  std::string two_hosts = data("nccl/all_reduce_4x4090.log");
  two_hosts.replace(two_hosts.find("on 7773x device  3") + 3, 5, "other");
  auto l = parse_nccl_tests_log(two_hosts, "x.log");
  ASSERT_TRUE(l.ok()) << l.error().message;
  auto fit = fit_to_nccl_tests(preset("a6000x8"), {*l});
  ASSERT_FALSE(fit.ok());
  EXPECT_EQ(fit.error().message,
            "x.log: the ranks run on 2 hosts; only single-machine logs can be fitted to a profile");
  auto h20 = log_of("all_reduce_8xh20.log");
  auto small = fit_to_nccl_tests(preset("a6000x4"), {h20});
  ASSERT_FALSE(small.ok());
  EXPECT_EQ(small.error().message, "all_reduce_8xh20.log: 8 ranks but profile 'a6000x4' has 4 GPUs");
}

}  // namespace
}  // namespace compass::measure
