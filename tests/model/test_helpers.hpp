#pragma once
// Small machines built in the tests, so hand-computed numbers do not depend on the presets.

#include <cstdint>
#include <string>

#include "compass/hardware/profile.hpp"
#include "compass/workload/operator.hpp"

namespace compass::model::testing {

/// An operator of `kind` with global M, N, K at TP degree `tp` (bf16).
inline workload::OperatorSpec op_of(workload::OpKind kind, std::int64_t m, std::int64_t n,
                                    std::int64_t k, int tp) {
  return workload::OperatorSpec{.kind = kind, .m = m, .n = n, .k = k, .tp = tp};
}

/// `n` GPUs on one switch; every GPU link carries `bw` bytes/s each way with `lat` seconds of
/// latency. Devices: `sms` SMs, 1e12 FLOP/s bf16 peak, calibrated efficiency 0.5, 1e15 B/s
/// memory (so GEMMs are compute bound), launch 5 us, no interference unless set by the test.
inline hardware::Profile uniform_switch(int n, double bw = 10e9, double lat = 1e-6, int sms = 4) {
  hardware::Profile p;
  p.name = "uniform" + std::to_string(n);
  hardware::DeviceSpec d;
  d.name = "toy";
  d.arch = "toy";
  d.sm_count = sms;
  d.peak_flops[DType::bf16] = 1e12;
  d.memory_bandwidth_bytes_per_s = 1e15;
  d.memory_bytes = 1e10;
  d.copy_engines = 2;
  p.devices.push_back(d);
  for (int i = 0; i < n; ++i)
    p.nodes.push_back({"gpu" + std::to_string(i), hardware::NodeKind::gpu, "toy"});
  p.nodes.push_back({"sw", hardware::NodeKind::pcie_switch, ""});
  for (int i = 0; i < n; ++i) {
    hardware::Link l;
    l.name = "link" + std::to_string(i);
    l.kind = hardware::LinkKind::pcie;
    l.a = i;
    l.b = n;
    l.bandwidth_bytes_per_s = bw;
    l.reverse_bandwidth_bytes_per_s = bw;
    l.latency_s = lat;
    p.links.push_back(l);
  }
  p.calibration.gemm_efficiency = 0.5;
  p.interference = hardware::Interference{1.0, 1.0, 1.0};
  const Status s = hardware::compute_missing_routes(p);
  COMPASS_CHECK(s.ok(), "{}", s.ok() ? "" : s.error().message);
  return p;
}

}  // namespace compass::model::testing
