// Max-min fair sharing by progressive filling, and an event-driven run of flows to completion.
//
// Every link direction is a resource with capacity Profile::hop_bandwidth. Progressive filling
// repeatedly picks the resource with the smallest fair share (remaining capacity / unfrozen
// flows crossing it), freezes its flows at that share and removes their rate from every other
// resource they cross. Ties are broken by the lowest resource id so results are deterministic.

#include "compass/hardware/flows.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace compass::hardware {
namespace detail {

int dir_id(const Hop& h) {
  return h.link * 2 + (h.forward ? 0 : 1);
}

Hop dir_hop(int id) {
  return Hop{id / 2, id % 2 == 0};
}

std::vector<double> dir_capacities(const Profile& p) {
  std::vector<double> cap(p.links.size() * 2, 0.0);
  for (std::size_t l = 0; l < p.links.size(); ++l) {
    cap[2 * l] = p.links[l].bandwidth_bytes_per_s;
    cap[2 * l + 1] = p.links[l].reverse_bandwidth_bytes_per_s;
  }
  return cap;
}

std::vector<int> route_dirs(const Profile& p, int src, int dst) {
  std::vector<int> dirs;
  if (src == dst) return dirs;
  for (const Hop& h : p.route(src, dst).hops) dirs.push_back(dir_id(h));
  // A route that crossed one direction twice would be a routing bug; count it once.
  std::sort(dirs.begin(), dirs.end());
  dirs.erase(std::unique(dirs.begin(), dirs.end()), dirs.end());
  return dirs;
}

std::vector<double> maxmin(const std::vector<double>& cap, const std::vector<FlowPath>& flows) {
  const std::size_t nf = flows.size();
  const std::size_t nd = cap.size();
  std::vector<double> rate(nf, 0.0);
  std::vector<char> frozen(nf, 1);
  // The users of every direction in one flat array (CSR): the planner calls this in its inner
  // loop, and one small vector per direction made allocation the dominant cost.
  std::vector<int> start(nd + 1, 0);
  for (std::size_t f = 0; f < nf; ++f) {
    if (!flows[f].active || flows[f].dirs.empty()) continue;
    frozen[f] = 0;
    for (int d : flows[f].dirs) ++start[static_cast<std::size_t>(d) + 1];
  }
  std::vector<int> count(nd, 0);
  for (std::size_t d = 0; d < nd; ++d) {
    count[d] = start[d + 1];
    start[d + 1] += start[d];
  }
  std::vector<int> users(static_cast<std::size_t>(start[nd]));
  {
    std::vector<int> fill(start.begin(), start.end() - 1);
    for (std::size_t f = 0; f < nf; ++f)
      if (!frozen[f])
        for (int d : flows[f].dirs) users[static_cast<std::size_t>(fill[d]++)] = static_cast<int>(f);
  }
  std::vector<double> remaining = cap;
  while (true) {
    int best = -1;
    double best_share = 0;
    for (std::size_t d = 0; d < nd; ++d) {
      if (count[d] == 0) continue;
      double share = std::max(0.0, remaining[d]) / count[d];
      if (best < 0 || share < best_share) {
        best = static_cast<int>(d);
        best_share = share;
      }
    }
    if (best < 0) break;
    for (int u = start[best]; u < start[best + 1]; ++u) {
      const int f = users[static_cast<std::size_t>(u)];
      if (frozen[f]) continue;
      frozen[f] = 1;
      rate[f] = best_share;
      for (int d : flows[f].dirs) {
        remaining[d] -= best_share;
        --count[d];
      }
    }
    remaining[best] = 0;
  }
  return rate;
}

std::vector<double> simulate(const std::vector<double>& cap, std::vector<FlowPath> flows,
                             const std::vector<double>& bytes,
                             const std::vector<double>& latency_s) {
  const std::size_t nf = flows.size();
  std::vector<double> finish(nf, 0.0);
  std::vector<double> left(nf, 0.0);
  std::size_t active = 0;
  for (std::size_t f = 0; f < nf; ++f) {
    if (!flows[f].active) continue;
    if (flows[f].dirs.empty()) {
      // A route with no hops moves data without touching a link: only its latency counts.
      finish[f] = latency_s[f];
      flows[f].active = false;
      continue;
    }
    left[f] = bytes[f];
    ++active;
  }
  double now_s = 0;
  while (active > 0) {
    const std::vector<double> rate = maxmin(cap, flows);
    double dt = std::numeric_limits<double>::infinity();
    for (std::size_t f = 0; f < nf; ++f)
      if (flows[f].active && rate[f] > 0) dt = std::min(dt, left[f] / rate[f]);
    if (!std::isfinite(dt)) {
      // Only zero-capacity directions remain: these flows never finish; say so, never hang.
      for (std::size_t f = 0; f < nf; ++f)
        if (flows[f].active) finish[f] = std::numeric_limits<double>::infinity();
      break;
    }
    now_s += dt;
    for (std::size_t f = 0; f < nf; ++f) {
      if (!flows[f].active) continue;
      // The flow(s) that define dt finish now, and so does any flow within rounding of done.
      bool done = rate[f] > 0 && (left[f] / rate[f] <= dt * (1 + 1e-12) ||
                                  left[f] - rate[f] * dt <= 1e-12 * bytes[f]);
      if (done) {
        left[f] = 0;
        flows[f].active = false;
        --active;
        finish[f] = now_s + latency_s[f];
      } else {
        left[f] -= rate[f] * dt;
      }
    }
  }
  return finish;
}

}  // namespace detail

namespace {

// The per-flow paths of `flows`; flows with no bytes or src == dst are inactive.
std::vector<detail::FlowPath> paths_of(const Profile& p, const std::vector<Flow>& flows) {
  std::vector<detail::FlowPath> paths(flows.size());
  for (std::size_t f = 0; f < flows.size(); ++f) {
    const Flow& fl = flows[f];
    paths[f].active = fl.bytes > 0 && fl.src != fl.dst;
    if (paths[f].active) paths[f].dirs = detail::route_dirs(p, fl.src, fl.dst);
  }
  return paths;
}

}  // namespace

std::vector<double> maxmin_rates(const Profile& p, const std::vector<Flow>& flows) {
  return detail::maxmin(detail::dir_capacities(p), paths_of(p, flows));
}

FlowOutcome run_flows(const Profile& p, const std::vector<Flow>& flows) {
  const std::vector<double> cap = detail::dir_capacities(p);
  const std::size_t nf = flows.size();
  std::vector<double> bytes(nf), latency_s(nf, 0.0);
  for (std::size_t f = 0; f < nf; ++f) {
    bytes[f] = flows[f].bytes;
    if (flows[f].src != flows[f].dst) latency_s[f] = p.route_latency_s(flows[f].src, flows[f].dst);
  }
  FlowOutcome out;
  out.finish_s = detail::simulate(cap, paths_of(p, flows), bytes, latency_s);
  for (double t : out.finish_s) out.makespan_s = std::max(out.makespan_s, t);

  // Loads: every byte of every active flow crosses every hop of its route.
  std::vector<double> dir_bytes(cap.size(), 0.0);
  std::vector<int> count(cap.size(), 0);
  for (std::size_t f = 0; f < nf; ++f) {
    if (!(flows[f].bytes > 0 && flows[f].src != flows[f].dst)) continue;
    for (int d : detail::route_dirs(p, flows[f].src, flows[f].dst)) {
      dir_bytes[d] += flows[f].bytes;
      ++count[d];
    }
  }
  for (std::size_t d = 0; d < cap.size(); ++d) {
    if (count[d] == 0) continue;
    HopLoad l;
    l.hop = detail::dir_hop(static_cast<int>(d));
    l.name = p.hop_name(l.hop);
    l.bytes = dir_bytes[d];
    l.flows = count[d];
    l.busy_s = cap[d] > 0 ? dir_bytes[d] / cap[d] : std::numeric_limits<double>::infinity();
    out.loads.push_back(std::move(l));
  }
  sort_loads(out.loads);
  return out;
}

void sort_loads(std::vector<HopLoad>& loads) {
  std::stable_sort(loads.begin(), loads.end(), [](const HopLoad& a, const HopLoad& b) {
    if (a.busy_s != b.busy_s) return a.busy_s > b.busy_s;
    return detail::dir_id(a.hop) < detail::dir_id(b.hop);
  });
}

}  // namespace compass::hardware
