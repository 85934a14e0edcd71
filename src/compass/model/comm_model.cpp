#include "compass/model/comm_model.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "compass/model/cache_tables.hpp"

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

using detail::ScaledRun;
using detail::ScaledStep;

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

// run_released_flows of flows that all start together at 0 (no release, gap or wait), through
// `caches`: such a run scales exactly with a common byte count, so one run per pattern (the
// same routes and byte ratios) serves every size; each finish is (data time per byte) * bytes
// + its route latency.
std::vector<double> scaled_together(const hardware::Profile& p,
                                    const std::vector<TimedFlow>& flows, Caches& caches) {
  double scale = 0;
  for (const TimedFlow& f : flows) scale = std::max(scale, f.bytes);
  if (scale <= 0) return run_released_flows(p, flows, caches);
  std::vector<double> key;
  key.reserve(flows.size() * 12);
  for (const TimedFlow& f : flows) {
    append_key(p, f.src, f.dst, &key);
    key.push_back(f.bytes / scale);
  }
  std::vector<double> out(flows.size());
  const auto scale_up = [&](const ScaledRun& sc) {
    for (std::size_t i = 0; i < flows.size(); ++i)
      out[i] = sc.per_byte_s[i] * scale + sc.latency_s[i];
    return out;
  };
  auto& patterns = caches.tables().patterns;
  if (auto it = patterns.find(key); it != patterns.end()) return scale_up(it->second);
  ScaledRun sc;
  constexpr double kRef = 1e6;
  std::vector<TimedFlow> ref = flows;
  for (TimedFlow& f : ref) f.bytes = f.bytes / scale * kRef;
  const std::vector<double> fin = run_released_flows(p, ref, caches);
  for (std::size_t i = 0; i < ref.size(); ++i) {
    const double lat = ref[i].src == ref[i].dst ? 0.0 : p.route_latency_s(ref[i].src, ref[i].dst);
    sc.latency_s.push_back(lat);
    sc.per_byte_s.push_back((fin[i] - lat) / kRef);
  }
  if (patterns.size() > 4096) patterns.clear();
  patterns.emplace(key, sc);
  return scale_up(sc);
}

}  // namespace

StepTime cached_ring_step_time(const hardware::Profile& p, const std::vector<int>& ring_gpus,
                               const std::vector<int>* ring2_gpus, double bytes_each,
                               Caches& caches) {
  std::vector<std::vector<int>> rings{ring_gpus};
  if (ring2_gpus != nullptr) rings.push_back(*ring2_gpus);
  return cached_rings_step_time(p, rings, bytes_each, caches);
}

StepTime cached_rings_step_time(const hardware::Profile& p,
                                const std::vector<std::vector<int>>& rings, double bytes_each,
                                Caches& caches) {
  std::vector<hardware::Flow> flows;
  for (const std::vector<int>& ring : rings) {
    const std::size_t n = ring.size();
    for (std::size_t i = 0; i < n && n > 1; ++i) flows.push_back({ring[i], ring[(i + 1) % n], 1.0});
  }
  StepTime st;
  if (flows.empty() || bytes_each <= 0) return st;
  std::vector<double> key;
  key.reserve(flows.size() * 16);
  for (const hardware::Flow& f : flows) append_key(p, f.src, f.dst, &key);
  const auto step_of = [&](const ScaledStep& scaled) {
    for (std::size_t i = 0; i < scaled.per_byte_s.size(); ++i)
      st.time_s = std::max(st.time_s, scaled.per_byte_s[i] * bytes_each + scaled.latency_s[i]);
    st.bottleneck = scaled.bottleneck;
    return st;
  };
  auto& steps = caches.tables().steps;
  if (auto it = steps.find(key); it != steps.end()) return step_of(it->second);
  ScaledStep scaled;
  {
    constexpr double kRef = 1e6;
    for (hardware::Flow& f : flows) f.bytes = kRef;
    const hardware::FlowOutcome out = hardware::run_flows(p, flows);
    for (std::size_t i = 0; i < flows.size(); ++i) {
      const double lat = p.route_latency_s(flows[i].src, flows[i].dst);
      scaled.latency_s.push_back(lat);
      scaled.per_byte_s.push_back((out.finish_s[i] - lat) / kRef);
    }
    if (!out.loads.empty()) scaled.bottleneck = out.loads.front().name;
    if (steps.size() > 4096) steps.clear();  // bounded: patterns are few in practice
    steps.emplace(key, scaled);
  }
  return step_of(scaled);
}

namespace {

using detail::ReleasedWorkspace;

// The event loop of the straightforward version (each event: scan every flow for releases,
// max-min over all flows, scan every flow for dt and progress) with the same arithmetic in the
// same order, but bookkeeping that touches only what changes: a heap of known release times,
// the list of active flows, and max-min re-computed only where flows came or went
// (hardware::sharing::IncrementalMaxmin, bit-identical to maxmin over all flows with these
// active). Reads ws.paths and ws.latency.
std::vector<double> released_events(const std::vector<double>& cap,
                                    const std::vector<TimedFlow>& flows, ReleasedWorkspace& ws) {
  const std::size_t n = flows.size();
  constexpr double kInf = std::numeric_limits<double>::infinity();
  std::vector<double> finish(n, kInf);
  ws.remaining.resize(n);
  ws.sharing.reset(cap, ws.paths);
  const std::vector<int>& active = ws.sharing.active();
  ws.heap.clear();
  ws.done_below.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    ws.remaining[i] = flows[i].bytes;
    // Relative tolerance: the finishing flow's own remainder is rounding noise.
    ws.done_below[i] = 1e-9 * flows[i].bytes;
  }
  // Waiting lists, each in ascending index order (pushed from the back), and per flow its
  // predecessors not finished yet.
  ws.first_next.assign(n, -1);
  ws.next_of.assign(n, -1);
  ws.also_first_next.assign(n, -1);
  ws.also_next_of.assign(n, -1);
  ws.pending.assign(n, 0);
  for (std::size_t i = n; i-- > 0;) {
    if (const int a = flows[i].after; a >= 0) {
      ws.next_of[i] = ws.first_next[a];
      ws.first_next[a] = static_cast<int>(i);
      ++ws.pending[i];
    }
    if (const int a = flows[i].also_after; a >= 0) {
      ws.also_next_of[i] = ws.also_first_next[a];
      ws.also_first_next[a] = static_cast<int>(i);
      ++ws.pending[i];
    }
  }
  const auto later = [](const std::pair<double, int>& x, const std::pair<double, int>& y) {
    return x > y;  // min-heap on (release, index)
  };
  // A flow's release becomes known when it has no predecessor, or when its predecessor ends; a
  // release that can never come (NaN) is never known, as the scan-all version never releases it.
  const auto known = [&](int i, double rel) {
    if (std::isnan(rel)) return;
    ws.heap.emplace_back(rel, i);
    std::push_heap(ws.heap.begin(), ws.heap.end(), later);
  };
  // The release of a flow whose predecessors have all finished.
  const auto ready = [&](int j) {
    const TimedFlow& f = flows[j];
    double rel = f.release_s;
    if (f.after >= 0) rel = std::max(rel, finish[f.after] + f.gap_s);
    if (f.also_after >= 0) rel = std::max(rel, finish[f.also_after] + f.gap_s);
    known(j, rel);
  };
  const auto finished = [&](int i, double at_s) {
    finish[i] = at_s;
    for (int j = ws.first_next[i]; j >= 0; j = ws.next_of[j])
      if (--ws.pending[j] == 0) ready(j);
    for (int j = ws.also_first_next[i]; j >= 0; j = ws.also_next_of[j])
      if (--ws.pending[j] == 0) ready(j);
  };
  double now = 0;
  std::size_t left = n;
  for (std::size_t i = 0; i < n; ++i)
    if (flows[i].after < 0 && flows[i].also_after < 0) known(static_cast<int>(i), flows[i].release_s);
  for (std::size_t guard = 0; left > 0 && guard < 8 * n + 8; ++guard) {
    // Releases up to now (and what a flow that moves nothing releases at once).
    bool nothing_moved = false;
    while (!ws.heap.empty() && ws.heap.front().first <= now + 1e-15) {
      std::pop_heap(ws.heap.begin(), ws.heap.end(), later);
      const auto [rel, i] = ws.heap.back();
      ws.heap.pop_back();
      if (flows[i].src == flows[i].dst || flows[i].bytes <= 0) {
        // Moves nothing: finishes the moment it is released (may release a successor).
        finished(i, std::max(now, rel));
        --left;
        nothing_moved = true;
        continue;
      }
      ws.sharing.add(i);
    }
    const double next_release = nothing_moved     ? now
                                : ws.heap.empty() ? kInf
                                                  : ws.heap.front().first;
    if (active.empty()) {
      if (next_release == kInf) break;
      now = std::max(now, next_release);
      continue;
    }
    const std::vector<double>& rate = ws.sharing.rates();
    double dt = next_release - now;
    for (int i : active) {
      if (!(rate[i] > 0)) continue;
      const double t = ws.remaining[i] / rate[i];
      if (t < dt) dt = t;  // std::min(dt, t)
    }
    COMPASS_CHECK(dt < kInf, "flows with no bandwidth");
    dt = std::max(dt, 0.0);
    now += dt;
    ws.ended.clear();
    for (int i : active) {
      ws.remaining[i] -= rate[i] * dt;
      if (ws.remaining[i] <= ws.done_below[i]) ws.ended.push_back(i);
    }
    std::sort(ws.ended.begin(), ws.ended.end());  // in flow order (active() has none)
    for (int i : ws.ended) {
      ws.sharing.remove(i);
      finished(i, now + ws.latency[i]);
      --left;
    }
  }
  COMPASS_CHECK(left == 0, "{} flows never finished", left);
  return finish;
}

}  // namespace

namespace {

std::vector<double> run_flows(const hardware::Profile& p, const std::vector<TimedFlow>& flows,
                              Caches& caches, bool latency_at_end);

}  // namespace

std::vector<double> run_released_flows(const hardware::Profile& p,
                                       const std::vector<TimedFlow>& flows, Caches& caches) {
  return run_flows(p, flows, caches, true);
}

bool same_latencies(const hardware::Profile& p, const std::vector<TimedFlow>& flows) {
  double first = -1;
  for (const TimedFlow& f : flows) {
    if (f.src == f.dst) continue;
    const double lat = p.route_latency_s(f.src, f.dst);
    if (first < 0) first = lat;
    if (lat != first) return false;
  }
  return true;
}

std::vector<double> latency_first_flows(const hardware::Profile& p,
                                        const std::vector<TimedFlow>& flows, Caches& caches) {
  for (const TimedFlow& f : flows)
    COMPASS_CHECK(f.release_s == 0 && f.gap_s == 0 && f.after < 0 && f.also_after < 0,
                  "latency_first_flows: flows must start together at 0");
  if (same_latencies(p, flows)) return scaled_together(p, flows, caches);
  std::vector<double> key;
  key.reserve(flows.size() * 12);
  for (const TimedFlow& f : flows) {
    append_key(p, f.src, f.dst, &key);
    key.push_back(f.bytes);
  }
  auto& known = caches.tables().latency_first;
  if (auto it = known.find(key); it != known.end()) return it->second;
  std::vector<TimedFlow> released = flows;
  for (TimedFlow& f : released)
    if (f.src != f.dst) f.release_s = p.route_latency_s(f.src, f.dst);
  std::vector<double> fin = run_flows(p, released, caches, false);
  if (known.size() > 4096) known.clear();
  known.emplace(std::move(key), fin);
  return fin;
}

namespace {

// run_released_flows, or with `latency_at_end` false each flow finishing with its last byte
// (its latency, if any, is the caller's: in its release).
std::vector<double> run_flows(const hardware::Profile& p, const std::vector<TimedFlow>& flows,
                              Caches& caches, bool latency_at_end) {
  const std::size_t n = flows.size();
  for (std::size_t i = 0; i < n; ++i)
    COMPASS_CHECK((flows[i].after < 0 || static_cast<std::size_t>(flows[i].after) < i) &&
                      (flows[i].also_after < 0 ||
                       static_cast<std::size_t>(flows[i].also_after) < i),
                  "flow {} waits for a later flow", i);
  ReleasedWorkspace& ws = caches.tables().released;
  const std::vector<double> cap = hardware::sharing::dir_capacities(p);
  ws.paths.offset.assign(1, 0);
  ws.paths.dirs.clear();
  ws.latency.assign(n, 0.0);
  for (std::size_t i = 0; i < n; ++i) {
    const TimedFlow& f = flows[i];
    const std::size_t b = ws.paths.dirs.size();
    if (f.after >= 0 && flows[f.after].src == f.src && flows[f.after].dst == f.dst) {
      // Same route as the flow it waits for (the common case: one engine, one edge).
      // Copied by index after a reserve: inserting a vector's own range into it is undefined.
      const int a = f.after;
      const std::size_t from = ws.paths.offset[a], to = ws.paths.offset[a + 1];
      ws.paths.dirs.reserve(b + (to - from));
      for (std::size_t j = from; j < to; ++j) ws.paths.dirs.push_back(ws.paths.dirs[j]);
      ws.latency[i] = ws.latency[a];
    } else if (f.src != f.dst) {
      // The route's distinct directions, sorted (as hardware::sharing::route_dirs).
      for (const hardware::Hop& h : p.route(f.src, f.dst).hops)
        ws.paths.dirs.push_back(hardware::sharing::dir_id(h));
      std::sort(ws.paths.dirs.begin() + static_cast<std::ptrdiff_t>(b), ws.paths.dirs.end());
      ws.paths.dirs.erase(
          std::unique(ws.paths.dirs.begin() + static_cast<std::ptrdiff_t>(b), ws.paths.dirs.end()),
          ws.paths.dirs.end());
      ws.latency[i] = p.route_latency_s(f.src, f.dst);
    }
    ws.paths.offset.push_back(static_cast<int>(ws.paths.dirs.size()));
  }
  if (!latency_at_end) std::fill(ws.latency.begin(), ws.latency.end(), 0.0);
  return released_events(cap, flows, ws);
}

}  // namespace

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
