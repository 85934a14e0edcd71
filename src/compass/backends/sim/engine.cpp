// The SimGrid side of the simulator: builds the platform from the Profile and drives the
// schedule with one SimGrid actor for the whole simulation. Everything SimGrid-specific lives in
// this file.
//
// Why one actor: one actor per serial resource cost a context switch and several simcalls per
// task, plus a CPU sleep activity for every launch overhead; for 10^6 transfers that was more
// than half of the run time. Here every serial resource is a cursor into its task list: a task
// starts when the resource is idle and its dependency counter reaches zero; its timed part is a
// kernel timer; its SimGrid activity (a one-sided Comm or an Exec, started on behalf of maestro)
// reports its end through s4u::Activity::on_completion. The events of one instant are collected
// and handled together by the driver actor, which SimGrid runs after it has retired the finished
// activities -- where the per-resource actors used to run -- so activities start in the same
// phase of SimGrid's main loop as before. Timers coalesce with any clock advance within
// surf/precision of their date, exactly as SimGrid's CPU model ends the sleep activities the
// actors used. tests/backends/sim/test_engine.cpp checks the times against the actor version.

#include <simgrid/kernel/Timer.hpp>
#include <simgrid/s4u.hpp>
#include <simgrid/simix.hpp>
#include <xbt/config.hpp>
#include <xbt/log.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <queue>
#include <string>
#include <vector>

#include "compass/backends/sim/prepared.hpp"

namespace compass::backends::sim::detail {
namespace {

namespace sg4 = simgrid::s4u;
using simgrid::kernel::timer::Timer;

// GPU hosts compute at this speed (FLOP/s); a GEMM of model time t executes t * kHostSpeed
// "flops". Large so that SimGrid's work-amount precision (1e-5) is far below a nanosecond.
constexpr double kHostSpeed = 1e12;

// Bandwidth of the per-route first links (bytes/s): far above any real link, far below overflow.
constexpr double kUnlimitedBandwidth = 1e20;

// What a task does when its timed part (a timer) ends.
enum class Phase : std::uint8_t { launch_gemm, launch_comm, start_flow, end_local };

// A pending timed part: due at `date`; `seq` keeps equal dates in the order they were set.
struct Sleep {
  double date = 0;
  std::uint64_t seq = 0;
  int task = 0;
  Phase phase = Phase::end_local;
  bool operator>(const Sleep& o) const { return date != o.date ? date > o.date : seq > o.seq; }
};

struct EngineState {
  const Prepared* p = nullptr;
  double t0 = 0;
  double precision = 1e-9;  ///< SimGrid's surf/precision (seconds)
  std::vector<sg4::Host*> rank_host;
  std::vector<sg4::Link*> tracked_links;
  std::vector<double> tracked_bandwidth;

  // The task graph, flattened: successors of task i are succ[succ_begin[i] .. succ_begin[i+1]).
  std::vector<int> succ_begin;
  std::vector<int> succ;
  std::vector<int> missing;      ///< per task: dependencies not finished yet
  std::vector<int> resource_of;  ///< per task: index into Prepared::resources
  std::vector<char> done;

  std::vector<std::size_t> cursor;        ///< per resource: next position in its task list
  std::vector<char> busy;                 ///< per resource: a task has started and not finished
  std::vector<sg4::ActivityPtr> running;  ///< per resource: its SimGrid activity, if any
  /// Finished activities, released at the next clock advance (SimGrid is done with them then).
  std::vector<sg4::ActivityPtr> graveyard;

  std::priority_queue<Sleep, std::vector<Sleep>, std::greater<>> sleeps;
  std::vector<Timer*> timer_of;  ///< per task: its armed SimGrid timer (nullptr when none)
  std::uint64_t sleep_seq = 0;

  std::vector<int> finished;  ///< tasks that ended at the current instant, not yet propagated
  bool draining = false;

  // Events of the current instant, handled by the driver actor: timed parts that ended (in date
  // order) and activities that completed (in SimGrid's order).
  std::vector<Sleep> due;
  std::vector<int> completed;
  sg4::SemaphorePtr wake;  ///< released once per instant that has events
  bool wake_pending = false;
  std::size_t ended = 0;      ///< tasks finished so far
  std::size_t in_flight = 0;  ///< SimGrid activities running plus timed parts pending

  std::vector<double> flow_bytes;   ///< per task: bytes its flow carries once its latency ends
  std::vector<int> active_copies;  ///< per rank: copy-engine tasks moving data
  std::vector<int> running_gemms;  ///< per rank: 0 or 1
  std::vector<char> slow;          ///< per rank: host is in its slow power state

  RawResult raw;
  double last_sample_t = 0;
};

// The simulation the process-wide SimGrid signals forward to (one at a time; the signals cannot
// be disconnected in 3.32, so they are connected once and look here).
EngineState* g_state = nullptr;

double now() {
  return sg4::Engine::get_clock();
}

// The GPU host runs GEMMs slower while one of its copy engines moves data. Only the speed during
// a GEMM matters, so the power state follows "a GEMM runs and a copy is active".
void update_speed(EngineState& st, int rank) {
  if (st.p->gemm_slowdown == 1.0) return;
  const char want = st.running_gemms[rank] > 0 && st.active_copies[rank] > 0;
  if (want == st.slow[rank]) return;
  st.slow[rank] = want;
  st.rank_host[rank]->set_pstate(want ? 1 : 0);
}
void copy_engine_enter(EngineState& st, int rank) {
  ++st.active_copies[rank];
  update_speed(st, rank);
}
void copy_engine_leave(EngineState& st, int rank) {
  --st.active_copies[rank];
  update_speed(st, rank);
}

void fire_due_sleeps(EngineState& st);
void drain(EngineState& st);

void wake_driver(EngineState& st) {
  if (st.wake_pending) return;
  st.wake_pending = true;
  st.wake->release();
}

// A timer makes SimGrid stop the clock at its date; the time-advance callback normally collects
// the timed part first (and removes the timer), so this is a fallback.
void on_timer(int task) {
  EngineState& st = *g_state;
  st.timer_of[task] = nullptr;  // SimGrid deletes it after this callback
  fire_due_sleeps(st);
}

// The timed part of a task: ends `duration` from now (SimGrid's sleep rounds a positive duration
// up to surf/precision; so do we).
void sleep_then(EngineState& st, int task, double duration, Phase phase) {
  duration = std::max(duration, st.precision);
  const double date = now() + duration;
  st.sleeps.push(Sleep{date, st.sleep_seq++, task, phase});
  st.timer_of[task] = Timer::set(date, [task] { on_timer(task); });
  ++st.in_flight;
}

void task_ended(EngineState& st, int id) {
  st.finished.push_back(id);
}

void launch_gemm(EngineState& st, int id) {
  const TaskCost& c = st.p->costs[id];
  const int rank = c.rank;
  ++st.running_gemms[rank];
  update_speed(st, rank);
  if (c.gemm_s > 0) {
    sg4::ExecPtr exec = sg4::Exec::init();
    exec->set_host(st.rank_host[rank]);
    exec->set_flops_amount(c.gemm_s * kHostSpeed);
    exec->set_data(reinterpret_cast<void*>(static_cast<std::uintptr_t>(id) + 1));
    exec->start();
    st.running[st.resource_of[id]] = exec;
    ++st.in_flight;
    return;
  }
  --st.running_gemms[rank];
  update_speed(st, rank);
  task_ended(st, id);
}

// The bytes of a transfer whose route latency has passed, as a SimGrid flow. Every link of the
// SimGrid platform has zero latency (see run_engine), so every flow has the same sharing weight.
void start_flow(EngineState& st, int id) {
  const TaskCost& c = st.p->costs[id];
  sg4::CommPtr comm = sg4::Comm::sendto_init(st.rank_host[c.src_rank], st.rank_host[c.dst_rank]);
  comm->set_payload_size(static_cast<std::uint64_t>(std::llround(st.flow_bytes[id])));
  comm->set_data(reinterpret_cast<void*>(static_cast<std::uintptr_t>(id) + 1));
  comm->start();
  st.running[st.resource_of[id]] = comm;
  ++st.in_flight;
}

void launch_comm(EngineState& st, int id) {
  const TaskCost& c = st.p->costs[id];
  copy_engine_enter(st, c.rank);
  // Memory contention at either end while a GEMM runs there slows the transfer: it is charged
  // comm_slowdown times its bytes (3.32 ignores Comm::set_rate on one-sided comms, so a rate cap
  // is not available).
  double bytes = static_cast<double>(c.net_bytes);
  if (st.p->comm_slowdown != 1.0 &&
      (st.running_gemms[c.src_rank] > 0 || st.running_gemms[c.dst_rank] > 0))
    bytes *= st.p->comm_slowdown;
  st.flow_bytes[id] = bytes;
  // The route's latency first (the data takes no bandwidth meanwhile, as in SimGrid's own
  // latency phase), then the bytes.
  const double latency = st.p->routes[c.route].latency_s;
  if (latency > 0)
    sleep_then(st, id, latency, Phase::start_flow);
  else
    start_flow(st, id);
}

void end_local(EngineState& st, int id) {
  const TaskCost& c = st.p->costs[id];
  if (c.on_copy_engine) copy_engine_leave(st, c.rank);
  task_ended(st, id);
}

void continue_task(EngineState& st, int id, Phase phase) {
  switch (phase) {
    case Phase::launch_gemm:
      launch_gemm(st, id);
      break;
    case Phase::launch_comm:
      launch_comm(st, id);
      break;
    case Phase::start_flow:
      start_flow(st, id);
      break;
    case Phase::end_local:
      end_local(st, id);
      break;
  }
}

void start_task(EngineState& st, int id) {
  const TaskCost& c = st.p->costs[id];
  st.raw.tasks[id].start_s = now() - st.t0;
  if (c.gemm) {
    // The launch overhead, then the GEMM on the rank's GPU host.
    if (c.fixed_s > 0)
      sleep_then(st, id, c.fixed_s, Phase::launch_gemm);
    else
      launch_gemm(st, id);
  } else if (c.route >= 0) {
    // The issue overhead, then the bytes over the route.
    if (c.fixed_s > 0)
      sleep_then(st, id, c.fixed_s, Phase::launch_comm);
    else
      launch_comm(st, id);
  } else {
    // Local memory operations (self-transfers, copies, adds) are timed.
    if (c.on_copy_engine) copy_engine_enter(st, c.rank);
    if (c.fixed_s > 0)
      sleep_then(st, id, c.fixed_s, Phase::end_local);
    else
      end_local(st, id);
  }
}

// Starts the next task of resource `r` if the resource is idle and the task's dependencies are
// done.
void try_start(EngineState& st, int r) {
  if (st.busy[r]) return;
  const std::vector<int>& list = st.p->resource_tasks[r];
  if (st.cursor[r] >= list.size()) return;
  const int id = list[st.cursor[r]];
  if (st.missing[id] > 0) return;
  st.busy[r] = 1;
  start_task(st, id);
}

// Propagates every task that ended at this instant: frees its resource, starts that resource's
// next task, and releases the tasks that waited for it. A loop, not recursion, because a task of
// zero duration ends as soon as it starts.
void drain(EngineState& st) {
  if (st.draining) return;
  st.draining = true;
  for (std::size_t k = 0; k < st.finished.size(); ++k) {
    const int id = st.finished[k];
    st.raw.tasks[id].end_s = now() - st.t0;
    st.done[id] = 1;
    ++st.ended;
    const int r = st.resource_of[id];
    st.busy[r] = 0;
    ++st.cursor[r];
    try_start(st, r);
    for (int i = st.succ_begin[id]; i < st.succ_begin[id + 1]; ++i) {
      const int next = st.succ[i];
      if (--st.missing[next] == 0) try_start(st, st.resource_of[next]);
    }
  }
  st.finished.clear();
  st.draining = false;
}

// Collects every timed part due now. SimGrid's CPU model ends a sleep when the clock comes within
// surf/precision of its date, whatever advanced the clock; timers alone would fire exactly at the
// date, so the queue is checked at every clock advance.
void fire_due_sleeps(EngineState& st) {
  const double t = now();
  while (!st.sleeps.empty() && st.sleeps.top().date - t < st.precision) {
    const Sleep s = st.sleeps.top();
    st.sleeps.pop();
    if (Timer* timer = st.timer_of[s.task]; timer != nullptr) {
      timer->remove();
      st.timer_of[s.task] = nullptr;
    }
    st.due.push_back(s);
    wake_driver(st);
  }
}

void on_activity_done(const sg4::Activity& a) {
  EngineState& st = *g_state;
  const auto tag = reinterpret_cast<std::uintptr_t>(a.get_data<void>());
  if (tag == 0) return;
  st.completed.push_back(static_cast<int>(tag - 1));
  wake_driver(st);
}

// An activity of task `id` completed: its resource is free and the task has ended.
void activity_ended(EngineState& st, int id) {
  const TaskCost& c = st.p->costs[id];
  --st.in_flight;
  // SimGrid has retired the activity; release it at the next clock advance.
  st.graveyard.push_back(std::move(st.running[st.resource_of[id]]));
  if (c.gemm) {
    --st.running_gemms[c.rank];
    update_speed(st, c.rank);
  } else {
    copy_engine_leave(st, c.rank);
  }
  task_ended(st, id);
}

// Handles the events of this instant in the order the actors of the previous engine saw them:
// ended timed parts (SimGrid's CPU model reported those first), then completed activities.
void handle_instant(EngineState& st) {
  st.wake_pending = false;
  for (const Sleep& s : st.due) {
    --st.in_flight;
    continue_task(st, s.task, s.phase);
    drain(st);
  }
  st.due.clear();
  for (int id : st.completed) {
    activity_ended(st, id);
    drain(st);
  }
  st.completed.clear();
}

void driver(EngineState& st) {
  namespace kactor = simgrid::kernel::actor;
  // Everything that touches SimGrid runs in maestro's context (simcall_answered), so the
  // activities belong to maestro and report their completion through on_completion.
  kactor::simcall_answered([&st] {
    for (std::size_t r = 0; r < st.p->resources.size(); ++r) try_start(st, static_cast<int>(r));
    drain(st);
  });
  while (st.ended < st.done.size() && st.in_flight > 0) {
    st.wake->acquire();
    kactor::simcall_answered([&st] { handle_instant(st); });
  }
  // Returning ends the simulation: every task ended, or nothing is left that could end one
  // (a resource order that deadlocks).
}

void sample_links(EngineState& st) {
  const double t = now() - st.t0;
  // SimGrid fires this after advancing the clock: the usage it reports is the one that held
  // over the interval that just ended.
  for (std::size_t i = 0; i < st.tracked_links.size(); ++i) {
    const double u = st.tracked_links[i]->get_usage() / st.tracked_bandwidth[i];
    auto& v = st.raw.samples[i];
    if (v.empty() || v.back().utilisation != u) v.push_back(LinkSample{st.last_sample_t, u});
  }
  st.last_sample_t = t;
}

void on_time_advance() {
  EngineState& st = *g_state;
  if (!st.tracked_links.empty()) sample_links(st);
  st.graveyard.clear();
  fire_due_sleeps(st);
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
    // CM02 also weights each flow's share by its route latency (the flow's sharing penalty is
    // the sum of its links' latencies, a TCP round-trip bias): a flow over a 2 us route gets
    // twice the share of one over a 4 us route. GPU fabrics (NVLink, PCIe) are credit-based,
    // not RTT-fair, so SimGrid's links get zero latency -- every flow then has the same
    // penalty and the sharing is max-min fair -- and the engine waits out each route's latency
    // itself before the flow starts (start_flow).
    sg4::Engine::on_time_advance_cb([](double) {
      if (g_state != nullptr) on_time_advance();
    });
    sg4::Activity::on_completion_cb([](const sg4::Activity& a) {
      if (g_state != nullptr) on_activity_done(a);
    });
    configured = true;
  }

  EngineState st;
  st.p = &p;
  st.t0 = sg4::Engine::get_clock();
  st.precision = simgrid::config::get_value<double>("surf/precision");
  const int ranks = s.ranks();

  // Platform: GPUs are hosts (two power states: full speed and slowed by copy-engine
  // interference), every other node a router, every link split-duplex (UP = a->b).
  static int platform_serial = 0;  // names stay unique if a process runs several engines
  const std::string tag = platform_serial++ == 0 ? "" : fmt::format("#{}", platform_serial);
  sg4::NetZone* zone = sg4::create_full_zone("compass" + tag);
  std::vector<sg4::Host*> gpu_host(prof.gpu_count(), nullptr);
  {
    int gpu = 0;
    for (std::size_t i = 0; i < prof.nodes.size(); ++i) {
      const hardware::Node& n = prof.nodes[i];
      if (n.kind == hardware::NodeKind::gpu)
        gpu_host[gpu++] = zone->create_host(
            n.name + tag, std::vector<double>{kHostSpeed, kHostSpeed / p.gemm_slowdown});
      else
        zone->create_router(n.name + tag);
    }
  }
  std::vector<sg4::SplitDuplexLink*> links(prof.links.size(), nullptr);
  for (std::size_t i = 0; i < prof.links.size(); ++i) {
    const hardware::Link& l = prof.links[i];
    // SimGrid rejects a zero bandwidth; a direction no route uses may have one.
    auto* sl = zone->create_split_duplex_link(l.name + tag, std::max(l.bandwidth_bytes_per_s, 1.0));
    sl->get_link_down()->set_bandwidth(std::max(l.reverse_bandwidth_bytes_per_s, 1.0));
    // Latency is the engine's (see the configuration above), not SimGrid's.
    sl->set_latency(0);
    links[i] = sl;
  }
  // Every route starts with a link of its own that never limits anything. SimGrid 3.32's lazy
  // max-min update (the only one fast enough here) marks a flow's links for re-solving through
  // its first link only when the flow leaves its latency phase; if another flow has already
  // marked that first link in the same step, the flow's other links are not re-solved and it can
  // be given more than a link's capacity (seen with two flows from one NIC whose latencies end
  // together; network/optim:Full does not do that). A first link per GPU pair is only marked
  // together with the whole route, so every flow's links are re-solved.
  std::vector<sg4::LinkInRoute> hops;
  for (std::size_t i = 0; i < p.routes.size(); ++i) {
    const UsedRoute& r = p.routes[i];
    hops.clear();
    // (Profile links are split-duplex, so their SimGrid names end in _UP or _DOWN.)
    hops.emplace_back(zone->create_link(fmt::format("route:{}{}", i, tag), kUnlimitedBandwidth));
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

  // The task graph as counters and flat successor lists.
  const std::size_t n = s.tasks.size();
  st.succ_begin.assign(n + 1, 0);
  st.missing.resize(n);
  for (const schedule::Task& t : s.tasks) {
    st.missing[t.id] = static_cast<int>(t.deps.size());
    for (int d : t.deps) ++st.succ_begin[d + 1];
  }
  for (std::size_t i = 0; i < n; ++i) st.succ_begin[i + 1] += st.succ_begin[i];
  st.succ.resize(st.succ_begin[n]);
  {
    std::vector<int> fill(st.succ_begin.begin(), st.succ_begin.end() - 1);
    for (const schedule::Task& t : s.tasks)
      for (int d : t.deps) st.succ[fill[d]++] = t.id;
  }
  st.resource_of.assign(n, -1);
  for (std::size_t r = 0; r < p.resource_tasks.size(); ++r)
    for (int id : p.resource_tasks[r]) st.resource_of[id] = static_cast<int>(r);
  st.done.assign(n, 0);
  st.timer_of.assign(n, nullptr);
  st.cursor.assign(p.resources.size(), 0);
  st.busy.assign(p.resources.size(), 0);
  st.running.resize(p.resources.size());
  st.flow_bytes.assign(n, 0.0);
  st.active_copies.assign(ranks, 0);
  st.running_gemms.assign(ranks, 0);
  st.slow.assign(ranks, 0);
  st.raw.samples.resize(p.tracked.size());
  st.raw.tasks.assign(n, TaskTime{});

  st.wake = sg4::Semaphore::create(0);
  sg4::Actor::create("compass-driver", st.rank_host.front(), [&st] { driver(st); });

  g_state = &st;
  engine.run();
  st.graveyard.clear();
  g_state = nullptr;

  for (std::size_t i = 0; i < n; ++i) {
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
