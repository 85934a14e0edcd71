// The SimGrid side of the simulator: builds the platform from the Profile and runs one actor per
// serial resource of the schedule. Everything SimGrid-specific lives in this file.

#include <simgrid/s4u.hpp>
#include <xbt/log.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "compass/backends/sim/prepared.hpp"

namespace compass::backends::sim::detail {
namespace {

namespace sg4 = simgrid::s4u;

// GPU hosts compute at this speed (FLOP/s); a GEMM of model time t executes t * kHostSpeed
// "flops". Large so that SimGrid's work-amount precision (1e-5) is far below a nanosecond.
constexpr double kHostSpeed = 1e12;

// The time-advance signal is process-wide and cannot be disconnected in 3.32: one callback is
// connected once and forwards to the simulation currently running (if any).
std::function<void()>* g_on_time_advance = nullptr;

struct EngineState {
  const Prepared* p = nullptr;
  double t0 = 0;
  std::vector<sg4::Host*> rank_host;
  std::vector<sg4::Link*> tracked_links;
  std::vector<double> tracked_bandwidth;
  std::vector<char> done;
  std::vector<std::vector<int>> waiters;  ///< actors (resource indices) blocked on a task
  std::vector<sg4::SemaphorePtr> wake;    ///< one per actor
  std::vector<int> active_copies;         ///< per rank: copy-engine tasks moving data
  std::vector<int> running_gemms;         ///< per rank: 0 or 1
  RawResult raw;
  double last_sample_t = 0;
};

void copy_engine_enter(EngineState& st, int rank) {
  if (st.active_copies[rank]++ == 0 && st.p->gemm_slowdown != 1.0) st.rank_host[rank]->set_pstate(1);
}
void copy_engine_leave(EngineState& st, int rank) {
  if (--st.active_copies[rank] == 0 && st.p->gemm_slowdown != 1.0) st.rank_host[rank]->set_pstate(0);
}

void run_task(EngineState& st, int id) {
  const Prepared& p = *st.p;
  const schedule::Schedule& s = *p.schedule;
  const schedule::Task& t = s.tasks[id];
  const TaskCost& c = p.costs[id];
  const int rank = t.resource.rank;
  if (t.kind == schedule::TaskKind::gemm) {
    if (c.fixed_s > 0) sg4::this_actor::sleep_for(c.fixed_s);
    st.running_gemms[rank]++;
    if (c.gemm_s > 0) sg4::this_actor::execute(c.gemm_s * kHostSpeed);
    st.running_gemms[rank]--;
    return;
  }
  if (c.route >= 0) {
    if (c.fixed_s > 0) sg4::this_actor::sleep_for(c.fixed_s);
    const int dst_rank = s.owner(t.dst);
    const int src_rank = s.owner(t.src);
    copy_engine_enter(st, rank);
    // Memory contention at either end while a GEMM runs there slows the transfer: it is
    // charged comm_slowdown times its bytes (3.32 ignores Comm::set_rate on one-sided comms, so
    // a rate cap is not available).
    double bytes = static_cast<double>(c.net_bytes);
    if (p.comm_slowdown != 1.0 && (st.running_gemms[src_rank] > 0 || st.running_gemms[dst_rank] > 0))
      bytes *= p.comm_slowdown;
    sg4::CommPtr comm = sg4::Comm::sendto_init(st.rank_host[src_rank], st.rank_host[dst_rank]);
    comm->set_payload_size(static_cast<std::uint64_t>(std::llround(bytes)));
    comm->start();
    comm->wait();
    copy_engine_leave(st, rank);
    return;
  }
  // Local memory operations (self-transfers, copies, adds) are timed.
  if (c.on_copy_engine) copy_engine_enter(st, rank);
  if (c.fixed_s > 0) sg4::this_actor::sleep_for(c.fixed_s);
  if (c.on_copy_engine) copy_engine_leave(st, rank);
}

void resource_actor(EngineState& st, int me) {
  const schedule::Schedule& s = *st.p->schedule;
  for (int id : st.p->resource_tasks[me]) {
    for (int d : s.tasks[id].deps) {
      while (!st.done[d]) {
        st.waiters[d].push_back(me);
        st.wake[me]->acquire();
      }
    }
    const double start = sg4::Engine::get_clock();
    run_task(st, id);
    st.raw.tasks[id] = TaskTime{start - st.t0, sg4::Engine::get_clock() - st.t0};
    st.done[id] = 1;
    for (int w : st.waiters[id]) st.wake[w]->release();
    st.waiters[id].clear();
  }
}

void sample_links(EngineState& st) {
  const double now = sg4::Engine::get_clock() - st.t0;
  // SimGrid fires this after advancing the clock: the usage it reports is the one that held
  // over the interval that just ended.
  for (std::size_t i = 0; i < st.tracked_links.size(); ++i) {
    const double u = st.tracked_links[i]->get_usage() / st.tracked_bandwidth[i];
    auto& v = st.raw.samples[i];
    if (v.empty() || v.back().utilisation != u) v.push_back(LinkSample{st.last_sample_t, u});
  }
  st.last_sample_t = now;
}

}  // namespace

Result<RawResult> run_engine(const Prepared& p) {
  static bool configured = false;
  const hardware::Profile& prof = *p.profile;
  const schedule::Schedule& s = *p.schedule;

  xbt_log_control_set("root.thresh:critical");
  sg4::Engine engine("compass-sim");
  if (!configured) {
    // CM02: plain max-min sharing without LV08's TCP corrections; no cross-traffic (full
    // duplex); TCP-gamma 0 removes the window bound gamma / (2 latency) on each flow's rate.
    sg4::Engine::set_config("network/model:CM02");
    sg4::Engine::set_config("network/crosstraffic:0");
    sg4::Engine::set_config("network/TCP-gamma:0");
    sg4::Engine::on_time_advance_cb([](double) {
      if (g_on_time_advance != nullptr) (*g_on_time_advance)();
    });
    configured = true;
  }

  EngineState st;
  st.p = &p;
  st.t0 = sg4::Engine::get_clock();
  const int ranks = s.ranks();

  // Platform: GPUs are hosts (two power states: full speed and slowed by copy-engine
  // interference), every other node a router, every link split-duplex (UP = a->b).
  static int platform_serial = 0;  // names stay unique if a process runs several engines
  const std::string tag = platform_serial++ == 0 ? "" : fmt::format("#{}", platform_serial);
  sg4::NetZone* zone = sg4::create_full_zone("compass" + tag);
  std::vector<sg4::Host*> gpu_host(prof.gpu_count(), nullptr);
  std::vector<simgrid::kernel::routing::NetPoint*> node_point(prof.nodes.size(), nullptr);
  {
    int gpu = 0;
    for (std::size_t i = 0; i < prof.nodes.size(); ++i) {
      const hardware::Node& n = prof.nodes[i];
      if (n.kind == hardware::NodeKind::gpu) {
        sg4::Host* h = zone->create_host(n.name + tag, std::vector<double>{kHostSpeed, kHostSpeed / p.gemm_slowdown});
        gpu_host[gpu++] = h;
        node_point[i] = h->get_netpoint();
      } else {
        node_point[i] = zone->create_router(n.name + tag);
      }
    }
  }
  std::vector<sg4::SplitDuplexLink*> links(prof.links.size(), nullptr);
  for (std::size_t i = 0; i < prof.links.size(); ++i) {
    const hardware::Link& l = prof.links[i];
    // SimGrid rejects a zero bandwidth; a direction no route uses may have one.
    auto* sl = zone->create_split_duplex_link(l.name + tag, std::max(l.bandwidth_bytes_per_s, 1.0));
    sl->get_link_down()->set_bandwidth(std::max(l.reverse_bandwidth_bytes_per_s, 1.0));
    sl->set_latency(l.latency_s);
    links[i] = sl;
  }
  for (const UsedRoute& r : p.routes) {
    std::vector<sg4::LinkInRoute> hops;
    hops.reserve(r.route->hops.size());
    for (const hardware::Hop& h : r.route->hops)
      hops.emplace_back(links[h.link], h.forward ? sg4::LinkInRoute::Direction::UP
                                                 : sg4::LinkInRoute::Direction::DOWN);
    zone->add_route(gpu_host[r.src_gpu]->get_netpoint(), gpu_host[r.dst_gpu]->get_netpoint(),
                    nullptr, nullptr, hops, /*symmetrical=*/false);
  }
  zone->seal();

  st.rank_host.resize(ranks);
  for (int r = 0; r < ranks; ++r) st.rank_host[r] = gpu_host[s.gpus[r]];
  for (const TrackedLink& tl : p.tracked) {
    sg4::Link* l = tl.forward ? links[tl.link]->get_link_up() : links[tl.link]->get_link_down();
    st.tracked_links.push_back(l);
    st.tracked_bandwidth.push_back(tl.forward ? prof.links[tl.link].bandwidth_bytes_per_s
                                              : prof.links[tl.link].reverse_bandwidth_bytes_per_s);
  }
  st.raw.samples.resize(p.tracked.size());
  st.raw.tasks.assign(s.tasks.size(), TaskTime{});
  st.done.assign(s.tasks.size(), 0);
  st.waiters.resize(s.tasks.size());
  st.active_copies.assign(ranks, 0);
  st.running_gemms.assign(ranks, 0);

  for (std::size_t a = 0; a < p.resources.size(); ++a) {
    st.wake.push_back(sg4::Semaphore::create(0));
    const schedule::Resource& res = p.resources[a];
    const std::string name = fmt::format("r{}-{}{}", res.rank,
                                         res.kind == schedule::ResourceKind::compute ? "compute" : "ce",
                                         res.kind == schedule::ResourceKind::compute ? "" : std::to_string(res.index));
    const int me = static_cast<int>(a);
    sg4::Actor::create(name, st.rank_host[res.rank], [&st, me] { resource_actor(st, me); });
  }

  std::function<void()> sampler = [&st] { sample_links(st); };
  g_on_time_advance = p.tracked.empty() ? nullptr : &sampler;
  engine.run();
  g_on_time_advance = nullptr;

  for (std::size_t i = 0; i < s.tasks.size(); ++i) {
    if (!st.done[i]) {
      const schedule::Task& t = s.tasks[i];
      return make_error(
          "schedule deadlocks: task {} '{}' on rank {} never finished (the order of tasks on a "
          "resource conflicts with their dependencies)",
          t.id, t.name, t.resource.rank);
    }
  }
  return std::move(st.raw);
}

}  // namespace compass::backends::sim::detail
