// Max-min fair sharing by progressive filling, and an event-driven run of flows to completion.
//
// Every link direction is a resource with capacity Profile::hop_bandwidth. Progressive filling
// repeatedly picks the resource with the smallest fair share (remaining capacity / unfrozen
// flows crossing it), freezes its flows at that share and removes their rate from every other
// resource they cross. Ties are broken by the lowest resource id so results are deterministic.

#include "compass/hardware/flows.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>

namespace compass::hardware {
namespace sharing {

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

void append_route_dirs(const Profile& p, int src, int dst, std::vector<int>& out) {
  if (src == dst) return;
  const auto from = static_cast<std::ptrdiff_t>(out.size());
  for (const Hop& h : p.route(src, dst).hops) out.push_back(dir_id(h));
  // A route that crossed one direction twice would be a routing bug; count it once.
  std::sort(out.begin() + from, out.end());
  out.erase(std::unique(out.begin() + from, out.end()), out.end());
}

std::vector<int> route_dirs(const Profile& p, int src, int dst) {
  std::vector<int> dirs;
  append_route_dirs(p, src, dst, dirs);
  return dirs;
}

void maxmin_of(const std::vector<double>& cap, const FlatPaths& paths, const std::vector<int>& ids,
               std::vector<double>& rate, MaxminWorkspace& ws) {
  if (ids.size() == 1) {
    // One flow crossing distinct directions: every share is max(0, cap) / 1, so its rate is the
    // smallest of them, which is what progressive filling gives.
    const int f = ids.front();
    const int* b = paths.dirs.data() + paths.offset[f];
    const int* e = paths.dirs.data() + paths.offset[f + 1];
    bool distinct = true;
    for (const int* i = b; i != e && distinct; ++i) distinct = std::find(i + 1, e, *i) == e;
    if (distinct) {
      double r = 0;
      for (const int* i = b; i != e; ++i) {
        const double share = std::max(0.0, cap[*i]);
        r = i == b ? share : std::min(r, share);
      }
      rate[f] = r;
      return;
    }
  }
  const std::size_t nd = cap.size();
  if (ws.count.size() < nd) {
    ws.count.resize(nd, 0);
    ws.remaining.resize(nd);
    ws.share.resize(nd);
  }
  // The directions in use (`live`, in order of first use) with their unfrozen users counted,
  // and the unfrozen flows in ascending order (the order a scan over all flows freezes them).
  ws.live.clear();
  ws.unfrozen.clear();
  for (int f : ids) {
    rate[f] = 0;
    const int b = paths.offset[f], e = paths.offset[f + 1];
    if (b == e) continue;
    ws.unfrozen.push_back(f);
    for (int i = b; i < e; ++i)
      if (ws.count[paths.dirs[i]]++ == 0) ws.live.push_back(paths.dirs[i]);
  }
  const auto share_of = [&](int d) { return std::max(0.0, ws.remaining[d]) / ws.count[d]; };
  for (int d : ws.live) {
    ws.remaining[d] = cap[d];
    ws.share[d] = share_of(d);
  }
  while (!ws.unfrozen.empty()) {
    // The smallest fair share, lowest direction id on ties (shares are never NaN, so this is
    // the pick of an ascending scan with a strict '<'); directions without unfrozen users drop
    // out of `live` (they are never picked again).
    int best = -1;
    double best_share = 0;
    std::size_t keep = 0;
    for (std::size_t i = 0; i < ws.live.size(); ++i) {
      const int d = ws.live[i];
      if (ws.count[d] == 0) continue;
      ws.live[keep++] = d;
      const double share = ws.share[d];
      if (best < 0 || share < best_share || (share == best_share && d < best)) {
        best = d;
        best_share = share;
      }
    }
    ws.live.resize(keep);
    // Freeze every unfrozen flow crossing `best` at its share, in ascending flow order.
    keep = 0;
    for (std::size_t u = 0; u < ws.unfrozen.size(); ++u) {
      const int f = ws.unfrozen[u];
      const int* b = paths.dirs.data() + paths.offset[f];
      const int* e = paths.dirs.data() + paths.offset[f + 1];
      if (std::find(b, e, best) == e) {
        ws.unfrozen[keep++] = f;
        continue;
      }
      rate[f] = best_share;
      // A direction's share is re-computed at its every change, so the last one holds; one
      // left without unfrozen users is never read again.
      for (const int* d = b; d != e; ++d) {
        ws.remaining[*d] -= best_share;
        if (--ws.count[*d] > 0) ws.share[*d] = share_of(*d);
      }
    }
    ws.unfrozen.resize(keep);
    ws.remaining[best] = 0;
  }
  // Every user was frozen, so `count` is all zero again for the next call.
}

void IncrementalMaxmin::reset(const std::vector<double>& cap, const FlatPaths& paths) {
  cap_ = &cap;
  paths_ = &paths;
  const std::size_t nf = paths.offset.size() - 1;
  active_.clear();
  seeds_.clear();
  dirty_dirs_.clear();
  rate_.assign(nf, 0.0);
  active_at_.assign(nf, -1);
  seen_flow_.assign(nf, 0u);
  seen_dir_.assign(cap.size(), 0u);
  if (users_.size() < cap.size()) users_.resize(cap.size());
  for (std::vector<int>& u : users_) u.clear();
  // Remembered rates hold for these capacities only (bit for bit); bounded.
  const bool same_cap =
      memo_cap_.size() == cap.size() &&
      std::equal(cap.begin(), cap.end(), memo_cap_.begin(), [](double a, double b) {
        return std::bit_cast<std::uint64_t>(a) == std::bit_cast<std::uint64_t>(b);
      });
  if (!same_cap || memo_entries_ > 4096) {
    memo_clear();
    memo_cap_ = cap;
  }
}

void IncrementalMaxmin::memo_clear() {
  memo_slots_.assign(1024, MemoSlot{});
  memo_words_.clear();
  memo_rates_.clear();
  memo_entries_ = 0;
}

const double* IncrementalMaxmin::memo_find(std::uint64_t hash) const {
  if (memo_slots_.empty()) return nullptr;
  const std::size_t mask = memo_slots_.size() - 1;
  for (std::size_t i = hash & mask;; i = (i + 1) & mask) {
    const MemoSlot& slot = memo_slots_[i];
    if (slot.hash == 0) return nullptr;
    if (slot.hash == hash && slot.key_words == memo_key_.size() &&
        std::equal(memo_key_.begin(), memo_key_.end(), memo_words_.begin() + slot.key_at))
      return memo_rates_.data() + slot.rates_at;
  }
}

void IncrementalMaxmin::memo_insert(std::uint64_t hash, const std::vector<double>& rate,
                                    const std::vector<int>& flows) {
  if (memo_slots_.empty() || 2 * (memo_entries_ + 1) > memo_slots_.size()) {
    // Grow to keep the table at most half full: every entry re-placed by its hash.
    std::vector<MemoSlot> old(std::max<std::size_t>(1024, 2 * memo_slots_.size()));
    old.swap(memo_slots_);
    const std::size_t mask = memo_slots_.size() - 1;
    for (const MemoSlot& slot : old)
      if (slot.hash != 0) {
        std::size_t i = slot.hash & mask;
        while (memo_slots_[i].hash != 0) i = (i + 1) & mask;
        memo_slots_[i] = slot;
      }
  }
  const std::size_t mask = memo_slots_.size() - 1;
  std::size_t i = hash & mask;
  while (memo_slots_[i].hash != 0) i = (i + 1) & mask;
  memo_slots_[i] = MemoSlot{hash, static_cast<std::uint32_t>(memo_words_.size()),
                            static_cast<std::uint32_t>(memo_key_.size()),
                            static_cast<std::uint32_t>(memo_rates_.size())};
  memo_words_.insert(memo_words_.end(), memo_key_.begin(), memo_key_.end());
  for (int f : flows) memo_rates_.push_back(rate[f]);
  ++memo_entries_;
}

void IncrementalMaxmin::add(int f) {
  active_at_[f] = static_cast<int>(active_.size());
  active_.push_back(f);
  for (int i = paths_->offset[f]; i < paths_->offset[f + 1]; ++i)
    users_[paths_->dirs[i]].push_back(f);
  seeds_.push_back(f);
}

void IncrementalMaxmin::remove(int f) {
  // The last active flow takes its place.
  const int at = active_at_[f];
  active_[static_cast<std::size_t>(at)] = active_.back();
  active_at_[active_.back()] = at;
  active_.pop_back();
  active_at_[f] = -1;
  for (int i = paths_->offset[f]; i < paths_->offset[f + 1]; ++i) {
    // A direction's users in any order: rates() sorts every component it walks.
    std::vector<int>& u = users_[paths_->dirs[i]];
    *std::find(u.begin(), u.end(), f) = u.back();
    u.pop_back();
    // The flows it shared this direction with must be re-shared.
    dirty_dirs_.push_back(paths_->dirs[i]);
  }
}

const std::vector<double>& IncrementalMaxmin::rates() {
  const FlatPaths& paths = *paths_;
  for (int d : dirty_dirs_)
    for (int g : users_[d]) seeds_.push_back(g);
  if (++epoch_ == 0) {  // the marks wrapped around: clear them
    std::fill(seen_flow_.begin(), seen_flow_.end(), 0u);
    std::fill(seen_dir_.begin(), seen_dir_.end(), 0u);
    epoch_ = 1;
  }
  // The component of every seed (flows joined by shared directions), found by a walk over the
  // directions' users, then re-shared on its own; components without a seed keep their rates.
  for (int s : seeds_) {
    if (active_at_[s] < 0 || seen_flow_[s] == epoch_) continue;
    component_.assign(1, s);
    seen_flow_[s] = epoch_;
    for (std::size_t k = 0; k < component_.size(); ++k) {
      const int f = component_[k];
      for (int i = paths.offset[f]; i < paths.offset[f + 1]; ++i) {
        const int d = paths.dirs[i];
        if (seen_dir_[d] == epoch_) continue;
        seen_dir_[d] = epoch_;
        for (int g : users_[d])
          if (seen_flow_[g] != epoch_) {
            seen_flow_[g] = epoch_;
            component_.push_back(g);
          }
      }
    }
    if (component_.size() == 1) {  // maxmin_of's own shortcut is cheaper than the memo
      maxmin_of(*cap_, paths, component_, rate_, ws_);
      continue;
    }
    if (component_.size() <= 8) {  // components are mostly small: an insertion sort
      for (std::size_t i = 1; i < component_.size(); ++i)
        for (std::size_t j = i; j > 0 && component_[j] < component_[j - 1]; --j)
          std::swap(component_[j], component_[j - 1]);
    } else {
      std::sort(component_.begin(), component_.end());
    }
    // [count, dirs...] per flow, written in place (sized first: the key is built per event).
    std::size_t words = component_.size();
    for (int f : component_) words += static_cast<std::size_t>(paths.offset[f + 1] - paths.offset[f]);
    memo_key_.resize(words);
    int* out = memo_key_.data();
    for (int f : component_) {
      const int* b = paths.dirs.data() + paths.offset[f];
      const int* e = paths.dirs.data() + paths.offset[f + 1];
      *out++ = static_cast<int>(e - b);
      out = std::copy(b, e, out);
    }
    std::uint64_t hash = 0xcbf29ce484222325ULL;
    for (int w : memo_key_) hash = (hash ^ static_cast<std::uint32_t>(w)) * 0x100000001b3ULL;
    hash = (hash ^ (hash >> 29)) | 1;  // never 0, the empty slot's
    if (const double* known = memo_find(hash)) {
      for (std::size_t j = 0; j < component_.size(); ++j) rate_[component_[j]] = known[j];
      continue;
    }
    maxmin_of(*cap_, paths, component_, rate_, ws_);
    memo_insert(hash, rate_, component_);
  }
  seeds_.clear();
  dirty_dirs_.clear();
  return rate_;
}

std::vector<double> maxmin(const std::vector<double>& cap, const std::vector<FlowPath>& flows) {
  MaxminWorkspace ws;
  return maxmin(cap, flows, ws);
}

std::vector<double> maxmin(const std::vector<double>& cap, const std::vector<FlowPath>& flows,
                           MaxminWorkspace& ws) {
  const std::size_t nf = flows.size();
  FlatPaths paths;
  std::vector<int> ids;
  for (std::size_t f = 0; f < nf; ++f) {
    paths.dirs.insert(paths.dirs.end(), flows[f].dirs.begin(), flows[f].dirs.end());
    paths.offset.push_back(static_cast<int>(paths.dirs.size()));
    if (flows[f].active) ids.push_back(static_cast<int>(f));
  }
  std::vector<double> rate(nf, 0.0);
  maxmin_of(cap, paths, ids, rate, ws);
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
  MaxminWorkspace ws;
  while (active > 0) {
    const std::vector<double> rate = maxmin(cap, flows, ws);
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

}  // namespace sharing

namespace {

// The per-flow paths of `flows`; flows with no bytes or src == dst are inactive.
std::vector<sharing::FlowPath> paths_of(const Profile& p, const std::vector<Flow>& flows) {
  std::vector<sharing::FlowPath> paths(flows.size());
  for (std::size_t f = 0; f < flows.size(); ++f) {
    const Flow& fl = flows[f];
    paths[f].active = fl.bytes > 0 && fl.src != fl.dst;
    if (paths[f].active) paths[f].dirs = sharing::route_dirs(p, fl.src, fl.dst);
  }
  return paths;
}

}  // namespace

std::vector<double> maxmin_rates(const Profile& p, const std::vector<Flow>& flows) {
  return sharing::maxmin(sharing::dir_capacities(p), paths_of(p, flows));
}

FlowOutcome run_flows(const Profile& p, const std::vector<Flow>& flows) {
  const std::vector<double> cap = sharing::dir_capacities(p);
  const std::size_t nf = flows.size();
  std::vector<double> bytes(nf), latency_s(nf, 0.0);
  for (std::size_t f = 0; f < nf; ++f) {
    bytes[f] = flows[f].bytes;
    if (flows[f].src != flows[f].dst) latency_s[f] = p.route_latency_s(flows[f].src, flows[f].dst);
  }
  FlowOutcome out;
  out.finish_s = sharing::simulate(cap, paths_of(p, flows), bytes, latency_s);
  for (double t : out.finish_s) out.makespan_s = std::max(out.makespan_s, t);

  // Loads: every byte of every active flow crosses every hop of its route.
  std::vector<double> dir_bytes(cap.size(), 0.0);
  std::vector<int> count(cap.size(), 0);
  for (std::size_t f = 0; f < nf; ++f) {
    if (!(flows[f].bytes > 0 && flows[f].src != flows[f].dst)) continue;
    for (int d : sharing::route_dirs(p, flows[f].src, flows[f].dst)) {
      dir_bytes[d] += flows[f].bytes;
      ++count[d];
    }
  }
  for (std::size_t d = 0; d < cap.size(); ++d) {
    if (count[d] == 0) continue;
    HopLoad l;
    l.hop = sharing::dir_hop(static_cast<int>(d));
    l.name = p.hop_name(l.hop);
    l.bytes = dir_bytes[d];
    l.flows = count[d];
    l.busy_s = cap[d] > 0 ? dir_bytes[d] / cap[d] : std::numeric_limits<double>::infinity();
    out.loads.push_back(std::move(l));
  }
  sort_loads(out.loads);
  return out;
}

std::vector<std::string> congested_beyond(const std::vector<HopLoad>& loads, double limit_s) {
  constexpr double kRelTol = 1e-9;
  std::vector<std::string> out;
  for (const HopLoad& l : loads)
    if (limit_s < l.busy_s - kRelTol * std::max(std::fabs(limit_s), std::fabs(l.busy_s)))
      out.push_back(l.name);
  return out;
}

void sort_loads(std::vector<HopLoad>& loads) {
  std::stable_sort(loads.begin(), loads.end(), [](const HopLoad& a, const HopLoad& b) {
    if (a.busy_s != b.busy_s) return a.busy_s > b.busy_s;
    return sharing::dir_id(a.hop) < sharing::dir_id(b.hop);
  });
}

}  // namespace compass::hardware
