// The job on SimGrid: one actor per pipeline stage runs the stage's passes in the schedule's order
// as executions; every send between stages is a SimGrid flow started when its pass ends; per
// stage one actor runs the DP gradient reduce-scatter buckets and one the parameter all-gather
// buckets, each ring step as flows on the same links the pipeline uses.
//
// Links carry no SimGrid latency (as in engine.cpp: CM02 would weight sharing by route latency);
// each communication waits out its route's latency, then moves its bytes.

#include "compass/backends/sim/job_sim.hpp"
#include "compass/backends/sim/isolated.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>
#include <xbt/log.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <set>
#include <simgrid/s4u.hpp>
#include <string>
#include <xbt/config.hpp>

#include "compass/job/memory.hpp"
#include "compass/job/pipeline.hpp"
#include "compass/model/comm_model.hpp"

namespace compass::backends::sim {
namespace {

namespace sg4 = simgrid::s4u;
using model::Collective;

constexpr double kHostSpeed = 1e12;  // a pass of t seconds executes t * kHostSpeed flops
constexpr double kUnlimitedBandwidth = 1e20;

// A DP collective split in the model's hierarchical way.
struct DpPlan {
  int intra_members = 1, stride = 1, inter_nodes = 1;
};

struct Sim {
  const job::Cluster* cl = nullptr;
  std::vector<std::vector<sg4::Host*>> node_gpu;  // per node copy: its GPU hosts
  sg4::NetZone* zone = nullptr;
  std::string tag;
  long flows = 0;

  // Starts moving `bytes` from a to b (the caller has waited out the route's latency).
  sg4::CommPtr start(sg4::Host* a, sg4::Host* b, double bytes) {
    ++flows;
    return sg4::Comm::sendto_async(a, b, std::max(1.0, std::round(bytes)));
  }
};

void sleep_s(double s) {
  if (s > 0) sg4::this_actor::sleep_for(s);
}

// The longest route latency of the rings' hops: a step of rings that start together waits it.
double ring_latency(const hardware::Profile& prof, const std::vector<std::vector<int>>& rings) {
  double latency = 0;
  for (const std::vector<int>& ring : rings)
    for (std::size_t i = 0; ring.size() > 1 && i < ring.size(); ++i)
      latency = std::max(latency, prof.route_latency_s(ring[i], ring[(i + 1) % ring.size()]));
  return latency;
}

// The model's ring collective (job::JobComm::dp_collective_s) as flows: inside the node the
// rings of the stage's TP ranks, each of `intra_members` GPUs spaced `stride` apart, every
// member sending to its successor each step;
// across nodes, the stage's GPU sends to its ring successor and receives from its predecessor
// (stand-ins on other nodes, behind their own NIC share).
void run_dp_collective(Sim& sim, const DpPlan& dp, int node, int gpu0, sg4::Host* next,
                       sg4::Host* prev, double total_bytes, Collective kind) {
  if (kind == Collective::all_reduce) {
    run_dp_collective(sim, dp, node, gpu0, next, prev, total_bytes, Collective::reduce_scatter);
    run_dp_collective(sim, dp, node, gpu0, next, prev, total_bytes, Collective::all_gather);
    return;
  }
  const hardware::Profile& prof = sim.cl->node;
  const double launch = prof.overheads.collective_launch_s;
  if (dp.intra_members > 1 && total_bytes > 0) {
    sleep_s(launch);
    // The rings of every TP rank of the stage (GPUs gpu0 .. gpu0 + stride - 1) run together.
    std::vector<std::vector<int>> rings(dp.stride);
    for (int t = 0; t < dp.stride; ++t)
      for (int i = 0; i < dp.intra_members; ++i) rings[t].push_back(gpu0 + t + i * dp.stride);
    const double latency = ring_latency(prof, rings);
    const double bytes = total_bytes / dp.intra_members;
    for (int step = 0; step < model::collective_steps(kind, dp.intra_members); ++step) {
      sleep_s(latency);
      std::vector<sg4::CommPtr> comms;
      for (const std::vector<int>& ring : rings)
        for (std::size_t i = 0; i < ring.size(); ++i)
          comms.push_back(sim.start(sim.node_gpu[node][ring[i]],
                                    sim.node_gpu[node][ring[(i + 1) % ring.size()]], bytes));
      sg4::Comm::wait_all(comms);
    }
  }
  if (dp.inter_nodes > 1 && total_bytes > 0) {
    sleep_s(launch);
    const double bytes = total_bytes / dp.intra_members / dp.inter_nodes;
    sg4::Host* me = sim.node_gpu[node][gpu0];
    for (int step = 0; step < model::collective_steps(kind, dp.inter_nodes); ++step) {
      sleep_s(sim.cl->inter_node_latency_s());
      std::vector<sg4::CommPtr> comms{sim.start(me, next, bytes), sim.start(prev, me, bytes)};
      sg4::Comm::wait_all(comms);
    }
  }
}

// The cluster scope's ring member: each step it sends its piece to its successor and waits
// until its predecessor's piece has landed (`arrived`, released by the predecessor), first on the
// ring inside the node, then on the ring across nodes.
struct RingMember {
  sg4::Host* me = nullptr;
  sg4::Host* intra_next = nullptr;  // null: no ring inside the node
  sg4::SemaphorePtr* intra_next_arrived = nullptr;
  sg4::SemaphorePtr intra_arrived;
  double intra_latency = 0;
  sg4::Host* inter_next = nullptr;  // null: no ring across nodes
  sg4::SemaphorePtr* inter_next_arrived = nullptr;
  sg4::SemaphorePtr inter_arrived;
};

void run_dp_member(Sim& sim, const DpPlan& dp, RingMember& r, double total_bytes,
                   Collective kind) {
  if (kind == Collective::all_reduce) {
    run_dp_member(sim, dp, r, total_bytes, Collective::reduce_scatter);
    run_dp_member(sim, dp, r, total_bytes, Collective::all_gather);
    return;
  }
  if (total_bytes <= 0) return;
  const double launch = sim.cl->node.overheads.collective_launch_s;
  if (r.intra_next != nullptr) {
    sleep_s(launch);
    const double bytes = total_bytes / dp.intra_members;
    for (int step = 0; step < model::collective_steps(kind, dp.intra_members); ++step) {
      sleep_s(r.intra_latency);
      sim.start(r.me, r.intra_next, bytes)->wait();
      (*r.intra_next_arrived)->release();
      r.intra_arrived->acquire();
    }
  }
  if (r.inter_next != nullptr) {
    sleep_s(launch);
    const double bytes = total_bytes / dp.intra_members / dp.inter_nodes;
    for (int step = 0; step < model::collective_steps(kind, dp.inter_nodes); ++step) {
      sleep_s(sim.cl->inter_node_latency_s());
      sim.start(r.me, r.inter_next, bytes)->wait();
      (*r.inter_next_arrived)->release();
      r.inter_arrived->acquire();
    }
  }
}

// The simulation itself, in this process (simulate_job runs it in a forked child).
Result<JobSimResult> simulate_here(const job::Cluster& cl, const workload::ModelConfig& m,
                                   const job::StepResult& step, const job::StepOptions& o,
                                   JobSimScope scope) {
  const job::Layout& l = step.layout;
  COMPASS_TRY(job::check(l, m));
  const int g = cl.gpus_per_node();
  if (l.tp > g) return make_error("TP {} is larger than a node of {} ({} GPUs)", l.tp, cl.name, g);
  if (l.gpus() > g && l.gpus() % g != 0)
    return make_error("{} GPUs do not fill whole nodes of {}", l.gpus(), g);
  const job::PipelineSpec& spec = step.pipeline;
  if (spec.stages != l.pp || spec.chunks != l.vpp || spec.microbatches != l.microbatches())
    return make_error("the pipeline spec is not the layout's (price the layout first)");
  COMPASS_ASSIGN(const job::PipelineTasks tasks, job::pipeline_tasks(spec));
  const job::Placement pl = job::place(l, g);
  const int p = l.pp, v = l.vpp, vs = p * v;
  const bool whole = scope == JobSimScope::cluster;
  // Context parallelism's exchange is in the pass durations, as the step model prices it; its
  // ranks are members of the gradient group (DP x CP ranks, tp apart), simulated as DP members.
  const int group = l.grad_group();
  if (whole && group % pl.dp_per_node != 0)
    return make_error(
        "the cluster scope needs DP groups that fill their nodes evenly ({} {} "
        "with {} members per node)",
        l.cp > 1 ? "DP x CP" : "DP", group, pl.dp_per_node);

  // The simulated pipelines: (TP rank, gradient-group member) pairs; the replica scope
  // simulates (0, 0). Rank order as Megatron's: TP fastest, then CP and DP, then the stage.
  const int copies_tp = whole ? l.tp : 1, copies_dp = whole ? group : 1;
  const int pipes = copies_tp * copies_dp;
  auto rank_of = [&](int pipe, int s) {
    const int t = pipe % copies_tp, d = pipe / copies_tp;
    return t + std::int64_t{l.tp} * (d + std::int64_t{group} * s);
  };
  // Where each simulated rank sits: a node copy and a GPU in it.
  std::vector<std::vector<int>> at_node(pipes, std::vector<int>(p)),
      at_gpu(pipes, std::vector<int>(p));
  std::map<std::int64_t, int> node_copy;  // cluster node index -> node copy
  for (int q = 0; q < pipes; ++q)
    for (int s = 0; s < p; ++s) {
      const std::int64_t rank = rank_of(q, s);
      const std::int64_t node = rank / g;
      if (!node_copy.count(node)) node_copy.emplace(node, static_cast<int>(node_copy.size()));
      at_node[q][s] = node_copy[node];
      at_gpu[q][s] = static_cast<int>(rank % g);
    }
  const bool multi_node = node_copy.size() > 1 || pl.dp_nodes > 1;
  if (multi_node && cl.nic.count < 1) return make_error("cluster {} has no NICs", cl.name);

  // Per virtual stage: parameters (per TP rank), as the step model counts them.
  const std::vector<int> layers = job::layers_per_virtual_stage(m.layers, p, v);
  const job::ParamCounts pc = job::param_counts(m);
  std::vector<double> chunk_params(vs);
  for (int u = 0; u < vs; ++u) {
    double params = layers[u] * pc.per_layer;
    if (u == 0) params += pc.embedding;
    if (u == vs - 1) params += pc.lm_head;
    chunk_params[u] = params / l.tp;
  }
  const double bucket_params = std::max(o.min_bucket_params, 1e6 * group);
  const bool sp = l.sequence_parallel && l.tp > 1;
  const double send_bytes = static_cast<double>(l.local_seq()) * l.micro_batch *
                            static_cast<double>(m.hidden) * 2 / (sp ? l.tp : 1);
  const Collective reduce =
      l.distributed_optimizer ? Collective::reduce_scatter : Collective::all_reduce;
  const DpPlan dpp{pl.dp_per_node, l.tp, pl.dp_nodes};
  const double mem_bw = cl.node.gpu_device(0).memory_bandwidth_bytes_per_s;

  static bool configured = false;
  xbt_log_control_set("root.thresh:critical");
  sg4::Engine engine("compass-job-sim");
  if (!configured && simgrid::config::get_value<std::string>("network/model") != "CM02") {
    sg4::Engine::set_config("network/model:CM02");
    sg4::Engine::set_config("network/crosstraffic:0");
    sg4::Engine::set_config("network/TCP-gamma:0");
  }
  configured = true;
  static int serial = 0;
  Sim sim;
  sim.cl = &cl;
  sim.tag = fmt::format("#job{}", serial++);
  sim.zone = sg4::create_full_zone("job" + sim.tag);
  const double t0 = sg4::Engine::get_clock();

  // Node copies: the node profile's GPUs, routers and split-duplex links, and its routes.
  const hardware::Profile& prof = cl.node;
  const int copies = static_cast<int>(node_copy.size());
  sim.node_gpu.assign(copies, std::vector<sg4::Host*>(g, nullptr));
  // The link each GPU reaches other nodes through: the replica scope gives every GPU its own
  // share of the NICs and uplinks; the cluster scope has the NICs themselves (rail-optimised:
  // NIC i * count / g for GPU i; otherwise one pooled link of all of them) and a node uplink.
  std::vector<std::vector<sg4::SplitDuplexLink*>> nic(copies,
                                                      std::vector<sg4::SplitDuplexLink*>(g));
  std::vector<sg4::SplitDuplexLink*> uplink(copies, nullptr);
  const double nic_rate = cl.nic.gbps * 1e9 / 8 * cl.nic.efficiency;
  // Every route starts with an unlimited link of its own, for the reason engine.cpp gives (SimGrid
  // 3.32's lazy max-min update re-solves a flow's links through its first link).
  auto first_link = [&](const std::string& what) {
    return sg4::LinkInRoute(sim.zone->create_link("first:" + what + sim.tag, kUnlimitedBandwidth));
  };
  auto duplex = [&](const std::string& name, double bw) {
    auto* sl = sim.zone->create_split_duplex_link(name + sim.tag, std::max(bw, 1.0));
    sl->set_latency(0);
    return sl;
  };
  for (int c = 0; c < copies; ++c) {
    const std::string ct = fmt::format("n{}:", c);
    int gpu = 0;
    for (const hardware::Node& n : prof.nodes) {
      if (n.kind == hardware::NodeKind::gpu)
        sim.node_gpu[c][gpu++] = sim.zone->create_host(ct + n.name + sim.tag, kHostSpeed);
      else
        sim.zone->create_router(ct + n.name + sim.tag);
    }
    std::vector<sg4::SplitDuplexLink*> links;
    for (const hardware::Link& hl : prof.links) {
      auto* sl = duplex(ct + hl.name, hl.bandwidth_bytes_per_s);
      sl->get_link_down()->set_bandwidth(std::max(hl.reverse_bandwidth_bytes_per_s, 1.0));
      links.push_back(sl);
    }
    for (const hardware::Route& r : prof.routes) {
      std::vector<sg4::LinkInRoute> hops{first_link(fmt::format("{}{}-{}", ct, r.src, r.dst))};
      for (const hardware::Hop& h : r.hops)
        hops.emplace_back(links[h.link], h.forward ? sg4::LinkInRoute::Direction::UP
                                                   : sg4::LinkInRoute::Direction::DOWN);
      sim.zone->add_route(sim.node_gpu[c][r.src]->get_netpoint(),
                          sim.node_gpu[c][r.dst]->get_netpoint(), nullptr, nullptr, hops, false);
    }
    if (!multi_node) continue;
    if (!whole) {
      for (int i = 0; i < g; ++i)
        nic[c][i] = duplex(fmt::format("{}nic{}", ct, i), cl.nic_bytes_per_s_per_gpu());
    } else if (cl.nic.rail_optimized) {
      std::vector<sg4::SplitDuplexLink*> own(cl.nic.count);
      for (int k = 0; k < cl.nic.count; ++k) own[k] = duplex(fmt::format("{}nic{}", ct, k), nic_rate);
      for (int i = 0; i < g; ++i) nic[c][i] = own[std::int64_t{i} * cl.nic.count / g];
    } else {
      auto* pooled = duplex(ct + "nics", nic_rate * cl.nic.count);
      for (int i = 0; i < g; ++i) nic[c][i] = pooled;
    }
    if (whole)
      uplink[c] = duplex(ct + "uplink", nic_rate * cl.nic.count / cl.network.oversubscription);
  }
  using Dir = sg4::LinkInRoute::Direction;
  std::set<std::pair<sg4::Host*, sg4::Host*>> routed;
  // GPU - its NIC (share) - [its node's uplink - the other node's uplink] - NIC (share) - GPU.
  auto route_across = [&](sg4::Host* a, int node_a, sg4::SplitDuplexLink* na, sg4::Host* b,
                          int node_b, sg4::SplitDuplexLink* nb) {
    if (!routed.insert({a, b}).second) return;
    std::vector<sg4::LinkInRoute> hops{first_link(a->get_name() + ">" + b->get_name()),
                                       sg4::LinkInRoute(na, Dir::UP)};
    if (node_a >= 0 && uplink[node_a] != nullptr) hops.emplace_back(uplink[node_a], Dir::UP);
    if (node_b >= 0 && uplink[node_b] != nullptr) hops.emplace_back(uplink[node_b], Dir::DOWN);
    hops.emplace_back(nb, Dir::DOWN);
    sim.zone->add_route(a->get_netpoint(), b->get_netpoint(), nullptr, nullptr, hops, false);
  };
  auto host_at = [&](int q, int s) { return sim.node_gpu[at_node[q][s]][at_gpu[q][s]]; };
  auto connect = [&](int qa, int sa, int qb, int sb) {
    if (at_node[qa][sa] == at_node[qb][sb]) return;
    route_across(host_at(qa, sa), at_node[qa][sa], nic[at_node[qa][sa]][at_gpu[qa][sa]],
                 host_at(qb, sb), at_node[qb][sb], nic[at_node[qb][sb]][at_gpu[qb][sb]]);
  };
  // Stage GPUs of one pipeline on different nodes.
  for (int q = 0; q < pipes; ++q)
    for (int a = 0; a < p; ++a)
      for (int b = 0; b < p; ++b) connect(q, a, q, b);

  // DP rings. The replica scope: the stage GPU drives its node's ring and exchanges with
  // stand-ins for its neighbours on other nodes, behind their own NIC shares. The cluster scope:
  // every member runs its own ring steps with its real neighbours.
  const bool dp_on = group > 1;
  std::vector<sg4::Host*> dp_next(p, nullptr), dp_prev(p, nullptr);
  if (dp_on && !whole && pl.dp_nodes > 1)
    for (int s = 0; s < p; ++s) {
      sg4::Host* me = host_at(0, s);
      sg4::SplitDuplexLink* my_nic = nic[at_node[0][s]][at_gpu[0][s]];
      for (int k = 0; k < 2; ++k) {
        const std::string nm = fmt::format("dp{}:s{}", k ? "prev" : "next", s);
        sg4::Host* h = sim.zone->create_host(nm + sim.tag, kHostSpeed);
        auto* hn = duplex("nic:" + nm, cl.nic_bytes_per_s_per_gpu());
        if (k == 0) {
          route_across(me, -1, my_nic, h, -1, hn);
          dp_next[s] = h;
        } else {
          route_across(h, -1, hn, me, -1, my_nic);
          dp_prev[s] = h;
        }
      }
    }
  // Cluster scope: per pipeline and stage, its member of the reduce ring and of the gather ring.
  enum { kReduce = 0, kGather = 1 };
  std::vector<std::vector<std::array<RingMember, 2>>> members(
      pipes, std::vector<std::array<RingMember, 2>>(p));
  if (dp_on && whole) {
    for (int q = 0; q < pipes; ++q)
      for (int s = 0; s < p; ++s)
        for (RingMember& r : members[q][s]) {
          r.me = host_at(q, s);
          r.intra_arrived = sg4::Semaphore::create(0);
          r.inter_arrived = sg4::Semaphore::create(0);
        }
    for (int q = 0; q < pipes; ++q) {
      const int t = q % copies_tp, d = q / copies_tp;
      const int i = d % dpp.intra_members, j = d / dpp.intra_members;
      const int intra_next = (j * dpp.intra_members + (i + 1) % dpp.intra_members) * copies_tp + t;
      const int inter_next = (((j + 1) % dpp.inter_nodes) * dpp.intra_members + i) * copies_tp + t;
      for (int s = 0; s < p; ++s) {
        // The slowest hop of the node's rings (every TP rank's), as the replica scope waits.
        std::vector<std::vector<int>> rings(copies_tp);
        for (int tt = 0; tt < copies_tp; ++tt)
          for (int k = 0; k < dpp.intra_members; ++k)
            rings[tt].push_back(at_gpu[(j * dpp.intra_members + k) * copies_tp + tt][s]);
        const double latency = ring_latency(prof, rings);
        for (int kind : {kReduce, kGather}) {
          RingMember& r = members[q][s][kind];
          if (dpp.intra_members > 1) {
            r.intra_next = host_at(intra_next, s);
            r.intra_next_arrived = &members[intra_next][s][kind].intra_arrived;
            r.intra_latency = latency;
          }
          if (dpp.inter_nodes > 1) {
            r.inter_next = host_at(inter_next, s);
            r.inter_next_arrived = &members[inter_next][s][kind].inter_arrived;
            connect(q, s, inter_next, s);
          }
        }
      }
    }
  }
  sim.zone->seal();

  // Dependencies as semaphores (per pipeline); a send is a flow that releases its receiver
  // when it lands.
  const std::size_t n = tasks.list.tasks.size();
  std::vector<std::vector<sg4::SemaphorePtr>> ready(pipes, std::vector<sg4::SemaphorePtr>(n));
  for (auto& r : ready)
    for (auto& sem : r) sem = sg4::Semaphore::create(0);
  std::vector<std::vector<std::pair<int, double>>> succ(n);  // (task, lag)
  for (std::size_t t = 0; t < n; ++t)
    for (const job::Dependency& d : tasks.list.deps_of(static_cast<int>(t)))
      succ[d.task].push_back({static_cast<int>(t), d.lag_s});
  auto send_latency = [&](int q, int a, int b) {
    if (at_node[q][a] != at_node[q][b]) return cl.inter_node_latency_s();
    return at_gpu[q][a] == at_gpu[q][b] ? 0.0 : prof.route_latency_s(at_gpu[q][a], at_gpu[q][b]);
  };

  // Per stage: the last backward and the first forward of each chunk (bucket boundaries).
  std::vector<int> last_b(vs, -1), first_f(vs, -1);
  for (int s = 0; s < p; ++s)
    for (int t : tasks.list.order[s]) {
      const job::PipelineTaskInfo& in = tasks.info[t];
      const int u = in.chunk * p + s;
      if (!in.forward) last_b[u] = t;
      if (in.forward && first_f[u] < 0) first_f[u] = t;
    }
  auto buckets_of = [&](int u) {
    return std::max(1, static_cast<int>(std::ceil(chunk_params[u] / bucket_params)));
  };

  struct StageDp {
    std::deque<double> rs_queue;  // bucket bytes, in ready order
    sg4::SemaphorePtr rs_ready = sg4::Semaphore::create(0);
    sg4::SemaphorePtr rs_done = sg4::Semaphore::create(0);
    std::map<std::pair<int, int>, sg4::SemaphorePtr> ag_done;  // (chunk, bucket)
    int rs_total = 0;
  };
  std::vector<std::vector<StageDp>> dps(pipes, std::vector<StageDp>(p));
  JobSimResult res;
  res.stage_end_s.assign(p, 0);
  res.done_s.assign(p, 0);
  auto collective = [&](int q, int s, int kind, double bytes, Collective c) {
    if (whole)
      run_dp_member(sim, dpp, members[q][s][kind], bytes, c);
    else
      run_dp_collective(sim, dpp, at_node[q][s], at_gpu[q][s], dp_next[s], dp_prev[s], bytes, c);
  };

  for (int q = 0; q < pipes; ++q)
    for (int s = 0; s < p; ++s) {
      StageDp& d = dps[q][s];
      if (dp_on) {
        for (int ch = 0; ch < v; ++ch) {
          d.rs_total += buckets_of(ch * p + s);
          if (l.distributed_optimizer)
            for (int k = 0; k < buckets_of(ch * p + s); ++k)
              d.ag_done[{ch, k}] = sg4::Semaphore::create(0);
        }
        sg4::Actor::create(fmt::format("rs{}.{}", q, s), host_at(q, s), [&, q, s] {
          StageDp& dd = dps[q][s];
          for (int k = 0; k < dd.rs_total; ++k) {
            dd.rs_ready->acquire();
            const double bytes = dd.rs_queue.front();
            dd.rs_queue.pop_front();
            collective(q, s, kReduce, bytes, reduce);
          }
          dd.rs_done->release();
        });
        if (l.distributed_optimizer)
          sg4::Actor::create(fmt::format("ag{}.{}", q, s), host_at(q, s), [&, q, s] {
            for (int ch = 0; ch < v; ++ch) {
              const int u = ch * p + s, nb = buckets_of(u);
              for (int k = 0; k < nb; ++k) {
                collective(q, s, kGather, chunk_params[u] / nb * o.memory.weight_bytes,
                           Collective::all_gather);
                dps[q][s].ag_done[{ch, k}]->release();
              }
            }
          });
      }
      sg4::Actor::create(fmt::format("stage{}.{}", q, s), host_at(q, s), [&, q, s] {
        StageDp& dd = dps[q][s];
        sg4::Host* me = host_at(q, s);
        std::vector<double> pending;  // reduce buckets held back without overlap
        auto push_bucket = [&](double bytes) {
          if (l.overlap_grad_reduce) {
            dd.rs_queue.push_back(bytes);
            dd.rs_ready->release();
          } else {
            pending.push_back(bytes);
          }
        };
        if (dp_on && l.distributed_optimizer && !l.overlap_param_gather)
          for (auto& [key, sem] : dd.ag_done) sem->acquire();
        for (int t : tasks.list.order[s]) {
          const job::Task& task = tasks.list.tasks[t];
          const job::PipelineTaskInfo& in = tasks.info[t];
          const int u = in.chunk * p + s;
          for (std::size_t k = 0; k < tasks.list.deps_of(t).size(); ++k) ready[q][t]->acquire();
          const bool gather_here =
              dp_on && l.distributed_optimizer && l.overlap_param_gather && t == first_f[u];
          const bool reduce_here = dp_on && t == last_b[u];
          const int pieces = gather_here || reduce_here ? buckets_of(u) : 1;
          for (int k = 0; k < pieces; ++k) {
            if (gather_here) dd.ag_done[{in.chunk, k}]->acquire();
            me->execute(task.duration_s / pieces * kHostSpeed);
            if (reduce_here) push_bucket(chunk_params[u] / pieces * o.memory.grad_bytes);
          }
          for (const auto& [to, lag] : succ[t]) {
            const int dst = tasks.list.tasks[to].resource;
            if (dst == s || lag <= 0) {
              ready[q][to]->release();
              continue;
            }
            const double latency = send_latency(q, s, dst);
            sg4::Host* dst_host = host_at(q, dst);
            sg4::SemaphorePtr sem = ready[q][to];
            sg4::Actor::create("send", me, [&sim, me, dst_host, latency, sem, send_bytes] {
              sleep_s(latency);
              sim.start(me, dst_host, send_bytes)->wait();
              sem->release();
            });
          }
        }
        res.stage_end_s[s] = std::max(res.stage_end_s[s], sg4::Engine::get_clock() - t0);
        if (dp_on) {
          for (double b : pending) {
            dd.rs_queue.push_back(b);
            dd.rs_ready->release();
          }
          dd.rs_done->acquire();
        }
        double stage_params = 0;
        for (int ch = 0; ch < v; ++ch) stage_params += chunk_params[ch * p + s];
        const double local = stage_params / (l.distributed_optimizer ? group : 1);
        sleep_s(local * o.optimizer_bytes_per_param / mem_bw + 10 * prof.overheads.kernel_launch_s);
        res.done_s[s] = std::max(res.done_s[s], sg4::Engine::get_clock() - t0);
      });
    }
  engine.run();
  for (int s = 0; s < p; ++s) {
    if (res.done_s[s] <= 0 && res.stage_end_s[s] <= 0)
      return make_error("job simulation: stage {} never finished", s);
    res.iteration_s = std::max(res.iteration_s, res.done_s[s]);
  }
  res.flows = sim.flows;
  return res;
}

// The outcome as bytes: 'E' and the message, or 'R' and the numbers.
std::string encode(const Result<JobSimResult>& r) {
  if (!r.ok()) return "E" + r.error().message;
  std::vector<double> v{r->iteration_s, static_cast<double>(r->flows),
                        static_cast<double>(r->stage_end_s.size())};
  v.insert(v.end(), r->stage_end_s.begin(), r->stage_end_s.end());
  v.insert(v.end(), r->done_s.begin(), r->done_s.end());
  std::string out = "R";
  out.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(double));
  return out;
}

Result<JobSimResult> decode(const std::string& bytes) {
  if (bytes.empty()) return make_error("job simulation: the simulator child sent nothing");
  if (bytes[0] == 'E') return make_error("{}", bytes.substr(1));
  std::vector<double> v((bytes.size() - 1) / sizeof(double));
  std::memcpy(v.data(), bytes.data() + 1, v.size() * sizeof(double));
  if (v.size() < 3) return make_error("job simulation: a short answer from the simulator child");
  JobSimResult r;
  r.iteration_s = v[0];
  r.flows = static_cast<long>(v[1]);
  const std::size_t p = static_cast<std::size_t>(v[2]);
  if (v.size() != 3 + 2 * p)
    return make_error("job simulation: a short answer from the simulator child");
  r.stage_end_s.assign(v.begin() + 3, v.begin() + 3 + static_cast<std::ptrdiff_t>(p));
  r.done_s.assign(v.begin() + 3 + static_cast<std::ptrdiff_t>(p), v.end());
  return r;
}

}  // namespace

// SimGrid is initialised once per process and keeps its configuration and platforms, so, as
// simulate() does for operators, each job simulation runs in a forked child: the calling
// process never holds SimGrid state, and operator and job simulations can follow each other.
Result<JobSimResult> simulate_job(const job::Cluster& cl, const workload::ModelConfig& m,
                                  const job::StepResult& step, const job::StepOptions& o,
                                  JobSimScope scope) {
  if (scope == JobSimScope::cluster && step.layout.gpus() > kMaxClusterScopeGpus)
    return make_error(
        "the cluster scope simulates every GPU, at most {}; {} GPUs take the replica "
        "scope",
        kMaxClusterScopeGpus, step.layout.gpus());
  const Result<std::string> bytes = detail::run_in_child("job simulation", [&] {
    try {
      return encode(simulate_here(cl, m, step, o, scope));
    } catch (const std::exception& e) {
      return encode(Result<JobSimResult>(make_error("job simulation: {}", e.what())));
    }
  });
  if (!bytes.ok()) return bytes.error();
  return decode(*bytes);
}

const char* to_string(JobSimScope scope) {
  return scope == JobSimScope::cluster ? "cluster" : "replica";
}

}  // namespace compass::backends::sim
