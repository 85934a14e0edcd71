#include "compass/hardware/gemm_cost.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

namespace compass::hardware {

double peak_flops(const hardware::Profile& p, DType dtype, int gpu) {
  const hardware::DeviceSpec& dev = p.gpu_device(gpu);
  const auto it = dev.peak_flops.find(dtype);
  // Callers check hardware::check_peak_flops first; pricing a dtype at another one's peak
  // (FP8 at the BF16 rate on a GPU without FP8) would be silently wrong.
  COMPASS_CHECK(it != dev.peak_flops.end() && it->second > 0, "device '{}' has no {} peak FLOP/s",
                dev.name, to_string(dtype));
  return it->second;
}

double large_gemm_efficiency(const hardware::Profile& p) {
  const auto& e = p.calibration.gemm_efficiency;
  if (e && *e > 0 && *e <= 1) return *e;
  return kDefaultGemmEfficiency;
}

GemmRoofline gemm_roofline(const hardware::Profile& p, std::int64_t m, std::int64_t n,
                           std::int64_t k, DType dtype, int gpu) {
  GemmRoofline r;
  if (m <= 0 || n <= 0 || k <= 0) return r;
  const hardware::DeviceSpec& dev = p.gpu_device(gpu);
  const std::int64_t sms = std::max(1, dev.sm_count);
  r.tiles = ((m + kTileRows - 1) / kTileRows) * ((n + kTileCols - 1) / kTileCols);
  r.waves = (r.tiles + sms - 1) / sms;
  r.wave_efficiency = static_cast<double>(r.tiles) / static_cast<double>(r.waves * sms);
  r.k_efficiency = static_cast<double>(k) / static_cast<double>(k + kTileKOverhead);
  // One SM's share of the sustained rate; a wave costs one full tile whatever its fill.
  const double sm_rate = peak_flops(p, dtype, gpu) * large_gemm_efficiency(p) / sms;
  const double tile_flops = 2.0 * kTileRows * kTileCols * static_cast<double>(k + kTileKOverhead);
  r.compute_s = static_cast<double>(r.waves) * tile_flops / sm_rate;
  const double bytes = static_cast<double>(m * k + k * n + m * n) * dtype_bytes(dtype);
  r.memory_s = dev.memory_bandwidth_bytes_per_s > 0 ? bytes / dev.memory_bandwidth_bytes_per_s : 0;
  r.time_s = std::max(r.compute_s, r.memory_s);
  return r;
}

namespace {

// Calibrated time (launch included, as measured) from the nearest samples in log space, or
// nullopt when the table has no sample of this dtype. Interpolates achieved FLOP/s by inverse
// distance over the (up to) 4 nearest samples, so a sample's own shape returns its time.
std::optional<double> calibrated_time_s(const hardware::Profile& p, std::int64_t m,
                                        std::int64_t n, std::int64_t k, DType dtype) {
  struct Near {
    double dist;
    double flops_per_s;
  };
  std::vector<Near> near;
  const double lm = std::log(static_cast<double>(m)), ln = std::log(static_cast<double>(n)),
               lk = std::log(static_cast<double>(k));
  for (const hardware::GemmSample& s : p.calibration.gemm) {
    if (s.dtype != dtype || s.m <= 0 || s.n <= 0 || s.k <= 0 || s.time_s <= 0) continue;
    const double dm = lm - std::log(static_cast<double>(s.m));
    const double dn = ln - std::log(static_cast<double>(s.n));
    const double dk = lk - std::log(static_cast<double>(s.k));
    const double flops = 2.0 * static_cast<double>(s.m) * s.n * s.k;
    near.push_back({std::sqrt(dm * dm + dn * dn + dk * dk), flops / s.time_s});
  }
  if (near.empty()) return std::nullopt;
  std::sort(near.begin(), near.end(), [](const Near& a, const Near& b) { return a.dist < b.dist; });
  const double flops = 2.0 * static_cast<double>(m) * n * k;
  if (near.front().dist < 1e-12) return flops / near.front().flops_per_s;
  const std::size_t used = std::min<std::size_t>(4, near.size());
  double wsum = 0, log_rate = 0;
  for (std::size_t i = 0; i < used; ++i) {
    const double w = 1.0 / (near[i].dist * near[i].dist);
    wsum += w;
    log_rate += w * std::log(near[i].flops_per_s);
  }
  return flops / std::exp(log_rate / wsum);
}

}  // namespace

double gemm_compute_s(const hardware::Profile& p, std::int64_t m, std::int64_t n, std::int64_t k,
                      DType dtype, int gpu) {
  if (m <= 0 || n <= 0 || k <= 0) return 0;
  if (auto t = calibrated_time_s(p, m, n, k, dtype))
    return std::max(0.0, *t - p.overheads.kernel_launch_s);
  return gemm_roofline(p, m, n, k, dtype, gpu).time_s;
}

double gemm_time_s(const hardware::Profile& p, std::int64_t m, std::int64_t n, std::int64_t k,
                   DType dtype, int gpu) {
  if (m <= 0 || n <= 0 || k <= 0) return 0;
  return gemm_compute_s(p, m, n, k, dtype, gpu) + p.overheads.kernel_launch_s;
}

}  // namespace compass::hardware
