#include "compass/model/comm_model.hpp"

#include <algorithm>
#include <limits>
#include <map>
#include <mutex>

namespace compass::model {

double transfer_time_s(const hardware::Profile& p, int src_gpu, int dst_gpu, double bytes) {
  if (src_gpu == dst_gpu || bytes <= 0) return 0;
  return p.route_latency_s(src_gpu, dst_gpu) + bytes / p.route_bandwidth(src_gpu, dst_gpu);
}

StepTime concurrent_flows_time(const hardware::Profile& p,
                               const std::vector<hardware::Flow>& flows) {
  StepTime st;
  std::vector<hardware::Flow> moving;
  for (const hardware::Flow& f : flows)
    if (f.src != f.dst && f.bytes > 0) moving.push_back(f);
  if (moving.empty()) return st;
  hardware::FlowOutcome out = hardware::run_flows(p, moving);
  st.time_s = out.makespan_s;
  st.loads = std::move(out.loads);
  if (!st.loads.empty()) st.bottleneck = st.loads.front().name;
  return st;
}

StepTime ring_step_time(const hardware::Profile& p, const std::vector<int>& ring_gpus,
                        double bytes) {
  std::vector<hardware::Flow> flows;
  const std::size_t n = ring_gpus.size();
  for (std::size_t i = 0; i < n && n > 1; ++i)
    flows.push_back({ring_gpus[i], ring_gpus[(i + 1) % n], bytes});
  return concurrent_flows_time(p, flows);
}

StepTime double_ring_step_time(const hardware::Profile& p, const std::vector<int>& ring1_gpus,
                               const std::vector<int>& ring2_gpus, double bytes_each) {
  std::vector<hardware::Flow> flows;
  for (const auto* ring : {&ring1_gpus, &ring2_gpus}) {
    const std::size_t n = ring->size();
    for (std::size_t i = 0; i < n && n > 1; ++i)
      flows.push_back({(*ring)[i], (*ring)[(i + 1) % n], bytes_each});
  }
  return concurrent_flows_time(p, flows);
}

namespace {

struct ScaledStep {
  std::vector<double> per_byte_s;  // data time per byte of each flow (latency excluded)
  std::vector<double> latency_s;
  std::string bottleneck;
};

// Appends what decides a flow's rate and latency: its hops with bandwidths and latencies.
void append_key(const hardware::Profile& p, int src, int dst, std::vector<double>* key) {
  key->push_back(-1.0 - src);
  key->push_back(-1.0 - dst);
  if (src == dst) return;
  for (const hardware::Hop& h : p.route(src, dst).hops) {
    key->push_back(h.forward ? h.link : -1.0 - h.link);
    key->push_back(p.hop_bandwidth(h));
    key->push_back(p.links[h.link].latency_s);
  }
}

}  // namespace

std::vector<double> cached_released_flows(const hardware::Profile& p,
                                          const std::vector<TimedFlow>& flows) {
  double scale = 0;
  for (const TimedFlow& f : flows) scale = std::max(scale, f.bytes);
  if (scale <= 0) return run_released_flows(p, flows);
  std::vector<double> key;
  key.reserve(flows.size() * 12);
  for (const TimedFlow& f : flows) {
    COMPASS_CHECK(f.release_s == 0 && f.gap_s == 0, "cached_released_flows: flows must start at 0");
    append_key(p, f.src, f.dst, &key);
    key.push_back(f.after);
    key.push_back(f.bytes / scale);
  }
  struct Scaled {
    std::vector<double> per_byte_s, latency_s;
  };
  static std::mutex mu;
  static std::map<std::vector<double>, Scaled> cache;
  Scaled sc;
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = cache.find(key);
    if (it != cache.end()) sc = it->second;
  }
  if (sc.per_byte_s.empty()) {
    constexpr double kRef = 1e6;
    std::vector<TimedFlow> ref = flows;
    for (TimedFlow& f : ref) f.bytes = f.bytes / scale * kRef;
    const std::vector<double> fin = run_released_flows(p, ref);
    // Latency is paid when a flow ends; chained successors start after it, so each finish is
    // (data time per byte) * bytes + (latencies of the chain up to and including it).
    for (std::size_t i = 0; i < ref.size(); ++i) {
      double lat = ref[i].src == ref[i].dst ? 0.0 : p.route_latency_s(ref[i].src, ref[i].dst);
      for (int a = ref[i].after; a >= 0; a = ref[a].after)
        if (ref[a].src != ref[a].dst) lat += p.route_latency_s(ref[a].src, ref[a].dst);
      sc.latency_s.push_back(lat);
      sc.per_byte_s.push_back((fin[i] - lat) / kRef);
    }
    std::lock_guard<std::mutex> lock(mu);
    if (cache.size() > 4096) cache.clear();
    cache.emplace(key, sc);
  }
  std::vector<double> out(flows.size());
  for (std::size_t i = 0; i < flows.size(); ++i)
    out[i] = sc.per_byte_s[i] * scale + sc.latency_s[i];
  return out;
}

StepTime cached_ring_step_time(const hardware::Profile& p, const std::vector<int>& ring_gpus,
                               const std::vector<int>* ring2_gpus, double bytes_each) {
  std::vector<hardware::Flow> flows;
  for (const std::vector<int>* ring : {&ring_gpus, ring2_gpus}) {
    if (ring == nullptr) continue;
    const std::size_t n = ring->size();
    for (std::size_t i = 0; i < n && n > 1; ++i)
      flows.push_back({(*ring)[i], (*ring)[(i + 1) % n], 1.0});
  }
  StepTime st;
  if (flows.empty() || bytes_each <= 0) return st;
  std::vector<double> key;
  key.reserve(flows.size() * 16);
  for (const hardware::Flow& f : flows) append_key(p, f.src, f.dst, &key);
  static std::mutex mu;
  static std::map<std::vector<double>, ScaledStep> cache;
  ScaledStep scaled;
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = cache.find(key);
    if (it != cache.end()) scaled = it->second;
  }
  if (scaled.per_byte_s.empty()) {
    constexpr double kRef = 1e6;
    for (hardware::Flow& f : flows) f.bytes = kRef;
    const hardware::FlowOutcome out = hardware::run_flows(p, flows);
    for (std::size_t i = 0; i < flows.size(); ++i) {
      const double lat = p.route_latency_s(flows[i].src, flows[i].dst);
      scaled.latency_s.push_back(lat);
      scaled.per_byte_s.push_back((out.finish_s[i] - lat) / kRef);
    }
    if (!out.loads.empty()) scaled.bottleneck = out.loads.front().name;
    std::lock_guard<std::mutex> lock(mu);
    if (cache.size() > 4096) cache.clear();  // bounded: patterns are few in practice
    cache.emplace(key, scaled);
  }
  for (std::size_t i = 0; i < scaled.per_byte_s.size(); ++i)
    st.time_s = std::max(st.time_s, scaled.per_byte_s[i] * bytes_each + scaled.latency_s[i]);
  st.bottleneck = scaled.bottleneck;
  return st;
}

std::vector<double> run_released_flows(const hardware::Profile& p,
                                       const std::vector<TimedFlow>& flows) {
  const std::size_t n = flows.size();
  constexpr double kInf = std::numeric_limits<double>::infinity();
  std::vector<double> finish(n, kInf), remaining(n, 0), latency(n, 0);
  std::vector<bool> done(n, false);
  // Capacities and paths once; each event only flips which flows are active.
  const std::vector<double> cap = hardware::detail::dir_capacities(p);
  std::vector<hardware::detail::FlowPath> paths(n);
  for (std::size_t i = 0; i < n; ++i) {
    remaining[i] = flows[i].bytes;
    if (flows[i].src != flows[i].dst) {
      paths[i].dirs = hardware::detail::route_dirs(p, flows[i].src, flows[i].dst);
      latency[i] = p.route_latency_s(flows[i].src, flows[i].dst);
    }
  }
  auto release_of = [&](std::size_t i) {  // kInf until its predecessor has finished
    const TimedFlow& f = flows[i];
    if (f.after < 0) return f.release_s;
    COMPASS_CHECK(static_cast<std::size_t>(f.after) < i, "flow {} waits for a later flow", i);
    return done[f.after] ? std::max(f.release_s, finish[f.after] + f.gap_s) : kInf;
  };
  double now = 0;
  std::size_t left = n;
  for (std::size_t guard = 0; left > 0 && guard < 8 * n + 8; ++guard) {
    double next_release = kInf;
    bool any_active = false;
    for (std::size_t i = 0; i < n; ++i) {
      paths[i].active = false;
      if (done[i]) continue;
      const double rel = release_of(i);
      if (rel <= now + 1e-15) {
        if (flows[i].src == flows[i].dst || flows[i].bytes <= 0) {
          // Moves nothing: finishes the moment it is released (may release a successor).
          done[i] = true;
          finish[i] = std::max(now, rel);
          --left;
          next_release = now;
          continue;
        }
        paths[i].active = true;
        any_active = true;
      } else {
        next_release = std::min(next_release, rel);
      }
    }
    if (!any_active) {
      if (next_release == kInf) break;
      now = std::max(now, next_release);
      continue;
    }
    const std::vector<double> rates = hardware::detail::maxmin(cap, paths);
    double dt = next_release - now;
    for (std::size_t i = 0; i < n; ++i)
      if (paths[i].active && rates[i] > 0) dt = std::min(dt, remaining[i] / rates[i]);
    COMPASS_CHECK(dt < kInf, "flows with no bandwidth");
    dt = std::max(dt, 0.0);
    now += dt;
    for (std::size_t i = 0; i < n; ++i) {
      if (!paths[i].active) continue;
      remaining[i] -= rates[i] * dt;
      // Relative tolerance: the finishing flow's own remainder is rounding noise.
      if (remaining[i] <= 1e-9 * flows[i].bytes) {
        done[i] = true;
        finish[i] = now + latency[i];
        --left;
      }
    }
  }
  COMPASS_CHECK(left == 0, "{} flows never finished", left);
  return finish;
}

int collective_steps(Collective kind, int p) {
  if (p <= 1) return 0;
  return kind == Collective::all_reduce ? 2 * (p - 1) : p - 1;
}

double ring_collective_time_s(const hardware::Profile& p, const std::vector<int>& ring_gpus,
                              double total_bytes, Collective kind, bool with_launch) {
  const int n = static_cast<int>(ring_gpus.size());
  const int steps = collective_steps(kind, n);
  if (steps == 0 || total_bytes <= 0) return 0;
  // Every step moves one shard per rank to its successor; all steps are alike.
  const double step = ring_step_time(p, ring_gpus, total_bytes / n).time_s;
  return steps * step + (with_launch ? p.overheads.collective_launch_s : 0.0);
}

}  // namespace compass::model
