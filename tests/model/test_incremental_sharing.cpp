// The fast paths of the flow model against straightforward re-computations, bit for bit:
// max-min over a subset of flows (maxmin_of), max-min re-computed per changed component
// (IncrementalMaxmin), and the event loop of run_released_flows. The references
// below are the plain versions: progressive filling over every flow and every direction, and an
// event loop that scans every flow and re-shares every flow at every event.

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>

#include "compass/hardware/flows.hpp"
#include "compass/hardware/presets.hpp"
#include "compass/model/comm_model.hpp"
#include "test_helpers.hpp"

namespace compass::model {
namespace {

namespace hd = hardware::sharing;
using testing::uniform_switch;

// Progressive filling over every direction (ascending ids, strict '<') and every flow.
std::vector<double> reference_maxmin(const std::vector<double>& cap,
                                     const std::vector<std::vector<int>>& dirs,
                                     const std::vector<char>& active) {
  const std::size_t nf = dirs.size();
  std::vector<double> rate(nf, 0.0), remaining = cap;
  std::vector<char> frozen(nf, 1);
  std::vector<int> count(cap.size(), 0);
  for (std::size_t f = 0; f < nf; ++f) {
    if (!active[f] || dirs[f].empty()) continue;
    frozen[f] = 0;
    for (int d : dirs[f]) ++count[d];
  }
  while (true) {
    int best = -1;
    double best_share = 0;
    for (std::size_t d = 0; d < cap.size(); ++d) {
      if (count[d] == 0) continue;
      const double share = std::max(0.0, remaining[d]) / count[d];
      if (best < 0 || share < best_share) {
        best = static_cast<int>(d);
        best_share = share;
      }
    }
    if (best < 0) break;
    for (std::size_t f = 0; f < nf; ++f) {
      if (frozen[f] || std::find(dirs[f].begin(), dirs[f].end(), best) == dirs[f].end()) continue;
      frozen[f] = 1;
      rate[f] = best_share;
      for (int d : dirs[f]) {
        remaining[d] -= best_share;
        --count[d];
      }
    }
    remaining[best] = 0;
  }
  return rate;
}

// The event loop without shortcuts: every event scans every flow for releases, re-shares every
// active flow, and scans every flow for the next event and for progress.
std::vector<double> reference_released(const hardware::Profile& p,
                                       const std::vector<TimedFlow>& flows) {
  const std::size_t n = flows.size();
  constexpr double kInf = std::numeric_limits<double>::infinity();
  std::vector<double> finish(n, kInf), remaining(n, 0), latency(n, 0);
  std::vector<char> done(n, 0), active(n, 0);
  const std::vector<double> cap = hd::dir_capacities(p);
  std::vector<std::vector<int>> dirs(n);
  for (std::size_t i = 0; i < n; ++i) {
    remaining[i] = flows[i].bytes;
    if (flows[i].src != flows[i].dst) {
      dirs[i] = hd::route_dirs(p, flows[i].src, flows[i].dst);
      latency[i] = p.route_latency_s(flows[i].src, flows[i].dst);
    }
  }
  auto release_of = [&](std::size_t i) {
    const TimedFlow& f = flows[i];
    double rel = f.release_s;
    for (const int a : {f.after, f.also_after}) {
      if (a < 0) continue;
      if (!done[a]) return kInf;
      rel = std::max(rel, finish[a] + f.gap_s);
    }
    return rel;
  };
  double now = 0;
  std::size_t left = n;
  for (std::size_t guard = 0; left > 0 && guard < 8 * n + 8; ++guard) {
    double next_release = kInf;
    bool any_active = false;
    for (std::size_t i = 0; i < n; ++i) {
      active[i] = 0;
      if (done[i]) continue;
      const double rel = release_of(i);
      if (rel <= now + 1e-15) {
        if (flows[i].src == flows[i].dst || flows[i].bytes <= 0) {
          done[i] = 1;
          finish[i] = std::max(now, rel);
          --left;
          next_release = now;
          continue;
        }
        active[i] = 1;
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
    const std::vector<double> rates = reference_maxmin(cap, dirs, active);
    double dt = next_release - now;
    for (std::size_t i = 0; i < n; ++i)
      if (active[i] && rates[i] > 0) dt = std::min(dt, remaining[i] / rates[i]);
    dt = std::max(dt, 0.0);
    now += dt;
    for (std::size_t i = 0; i < n; ++i) {
      if (!active[i]) continue;
      remaining[i] -= rates[i] * dt;
      if (remaining[i] <= 1e-9 * flows[i].bytes) {
        done[i] = 1;
        finish[i] = now + latency[i];
        --left;
      }
    }
  }
  return finish;
}

std::uint64_t bits(double x) { return std::bit_cast<std::uint64_t>(x); }

// Random directions per flow: 0-4 of `nd`, sometimes repeated (a path may list one twice).
std::vector<std::vector<int>> random_dirs(std::mt19937& rng, int nf, int nd) {
  std::vector<std::vector<int>> dirs(static_cast<std::size_t>(nf));
  std::uniform_int_distribution<int> hops(0, 4), dir(0, nd - 1);
  for (auto& d : dirs) {
    const int h = hops(rng);
    for (int i = 0; i < h; ++i) d.push_back(dir(rng));
  }
  return dirs;
}

// Capacities with many ties (a few distinct values) and an occasional zero.
std::vector<double> random_caps(std::mt19937& rng, int nd) {
  const double values[] = {0.0, 10e9, 20e9, 26e9, 56.25e9, 1e11 / 3};
  std::uniform_int_distribution<int> pick(0, 5);
  std::vector<double> cap(static_cast<std::size_t>(nd));
  for (double& c : cap) c = values[pick(rng)];
  return cap;
}

hd::FlatPaths flat(const std::vector<std::vector<int>>& dirs) {
  hd::FlatPaths paths;
  for (const auto& d : dirs) {
    paths.dirs.insert(paths.dirs.end(), d.begin(), d.end());
    paths.offset.push_back(static_cast<int>(paths.dirs.size()));
  }
  return paths;
}

TEST(IncrementalSharing, MaxminOfSubsetMatchesFullProgressiveFilling) {
  std::mt19937 rng(7);
  hd::MaxminWorkspace ws;  // reused across cases, as in the event loop
  int rated = 0;
  for (int trial = 0; trial < 400; ++trial) {
    const int nd = 2 + trial % 30, nf = 1 + trial % 25;
    const std::vector<double> cap = random_caps(rng, nd);
    const std::vector<std::vector<int>> dirs = random_dirs(rng, nf, nd);
    std::vector<char> active(static_cast<std::size_t>(nf));
    std::vector<int> ids;
    for (int f = 0; f < nf; ++f) {
      active[f] = rng() % 3 != 0;
      if (active[f]) ids.push_back(f);
    }
    const std::vector<double> want = reference_maxmin(cap, dirs, active);
    std::vector<double> got(static_cast<std::size_t>(nf), -1.0);
    hd::maxmin_of(cap, flat(dirs), ids, got, ws);
    std::vector<hd::FlowPath> fp(static_cast<std::size_t>(nf));
    for (int f = 0; f < nf; ++f) fp[f] = {dirs[f], active[f] != 0};
    const std::vector<double> whole = hd::maxmin(cap, fp);
    for (int f = 0; f < nf; ++f) {
      EXPECT_EQ(bits(whole[f]), bits(want[f])) << "trial " << trial << " flow " << f;
      if (!active[f]) {
        EXPECT_EQ(got[f], -1.0) << "maxmin_of wrote an inactive flow";
        continue;
      }
      EXPECT_EQ(bits(got[f]), bits(want[f])) << "trial " << trial << " flow " << f;
      rated += want[f] > 0;
    }
  }
  EXPECT_GT(rated, 1000);  // the cases are not all trivial
}

TEST(IncrementalSharing, RatesAfterEveryChangeMatchFullRecomputation) {
  std::mt19937 rng(11);
  hd::IncrementalMaxmin sharing;  // reused across cases
  int changes = 0;
  for (int trial = 0; trial < 60; ++trial) {
    const int nd = 4 + trial % 20, nf = 5 + trial % 40;
    const std::vector<double> cap = random_caps(rng, nd);
    const std::vector<std::vector<int>> dirs = random_dirs(rng, nf, nd);
    const hd::FlatPaths paths = flat(dirs);
    sharing.reset(cap, paths);
    std::vector<char> active(static_cast<std::size_t>(nf), 0);
    for (int step = 0; step < 120; ++step) {
      // One to three changes between two reads, as several flows can start or end at once.
      const int k = 1 + static_cast<int>(rng() % 3);
      for (int c = 0; c < k; ++c) {
        const int f = static_cast<int>(rng() % static_cast<unsigned>(nf));
        if (active[f]) {
          sharing.remove(f);
        } else {
          sharing.add(f);
        }
        active[f] = !active[f];
        ++changes;
      }
      std::vector<int> want_active;
      for (int f = 0; f < nf; ++f)
        if (active[f]) want_active.push_back(f);
      std::vector<int> got_active = sharing.active();  // in no particular order
      std::sort(got_active.begin(), got_active.end());
      ASSERT_EQ(got_active, want_active);
      const std::vector<double> want = reference_maxmin(cap, dirs, active);
      const std::vector<double>& got = sharing.rates();
      for (int f : want_active)
        ASSERT_EQ(bits(got[f]), bits(want[f]))
            << "trial " << trial << " step " << step << " flow " << f;
    }
  }
  EXPECT_GT(changes, 10000);
}

// Random released and chained flows on `p` (GPUs 0 .. gpus-1): some at equal times, some
// moving nothing, some between one GPU and itself, chains with issue gaps, some flows behind two.
std::vector<TimedFlow> random_timed_flows(std::mt19937& rng, int gpus, int n) {
  std::uniform_int_distribution<int> gpu(0, gpus - 1);
  const double sizes[] = {0.0, 1e6, 4e6, 16e6, 3.3e6};
  const double releases[] = {0.0, 0.0, 50e-6, 100e-6, 123.456e-6, 1e-3};
  std::vector<TimedFlow> flows;
  for (int i = 0; i < n; ++i) {
    TimedFlow f;
    f.src = gpu(rng);
    f.dst = rng() % 8 == 0 ? f.src : gpu(rng);
    f.bytes = sizes[rng() % 5];
    f.release_s = releases[rng() % 6];
    if (i > 0 && rng() % 2 == 0) {
      f.after = static_cast<int>(rng() % static_cast<unsigned>(i));
      f.gap_s = rng() % 2 ? 0.0 : 2e-6;
      if (rng() % 2) {  // the same edge as the flow it waits for, as a copy engine's queue
        f.src = flows[f.after].src;
        f.dst = flows[f.after].dst;
      }
      if (rng() % 3 == 0)  // and for the flow that brings its data, as a forward
        f.also_after = static_cast<int>(rng() % static_cast<unsigned>(i));
    }
    flows.push_back(f);
  }
  return flows;
}

TEST(IncrementalSharing, ReleasedFlowsMatchTheScanAllEventLoop) {
  std::vector<hardware::Profile> machines{uniform_switch(4, 10e9, 1e-6)};
  for (const char* name : {"a6000x8", "rtx4090x8", "h100x8"}) {
    Result<hardware::Profile> p = hardware::make_preset(name);
    ASSERT_TRUE(p.ok()) << name;
    machines.push_back(std::move(p).value());
  }
  std::mt19937 rng(3);
  int runs = 0;
  Caches caches;
  for (const hardware::Profile& p : machines) {
    for (int trial = 0; trial < 40; ++trial) {
      const std::vector<TimedFlow> flows = random_timed_flows(rng, p.gpu_count(), 1 + trial % 50);
      const std::vector<double> want = reference_released(p, flows);
      // The second call reuses the first one's buffers.
      for (int call = 0; call < 2; ++call) {
        const std::vector<double> got = run_released_flows(p, flows, caches);
        ASSERT_EQ(got.size(), want.size());
        for (std::size_t i = 0; i < want.size(); ++i)
          ASSERT_EQ(bits(got[i]), bits(want[i]))
              << p.name << " trial " << trial << " call " << call << " flow " << i;
      }
      ++runs;
    }
  }
  EXPECT_EQ(runs, 160);
}

TEST(IncrementalSharing, InputsOneBitApartGiveTheirOwnRuns) {
  const hardware::Profile p = uniform_switch(4, 10e9, 1e-6);
  std::vector<TimedFlow> flows{{0, 3, 1e6, 0.0}, {1, 3, 1e6, 50e-6}, {2, 3, 2e6, 0.0, 0, 2e-6}};
  Caches caches;
  const std::vector<double> first = run_released_flows(p, flows, caches);
  // A release one ulp later is another input: its answer is its own run, not the first one's.
  flows[1].release_s = std::nextafter(flows[1].release_s, 1.0);
  const std::vector<double> later = run_released_flows(p, flows, caches);
  const std::vector<double> want = reference_released(p, flows);
  for (std::size_t i = 0; i < flows.size(); ++i) EXPECT_EQ(bits(later[i]), bits(want[i]));
  EXPECT_NE(bits(later[0]), bits(first[0]));
  // Emptying the caches changes no answer, and neither does a second, fresh Caches.
  caches.clear();
  const std::vector<double> again = run_released_flows(p, flows, caches);
  for (std::size_t i = 0; i < flows.size(); ++i) EXPECT_EQ(bits(again[i]), bits(want[i]));
  Caches other;
  const std::vector<double> fresh = run_released_flows(p, flows, other);
  for (std::size_t i = 0; i < flows.size(); ++i) EXPECT_EQ(bits(fresh[i]), bits(want[i]));
}

}  // namespace
}  // namespace compass::model
