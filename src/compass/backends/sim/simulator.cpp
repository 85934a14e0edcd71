// simulate(): checks the input, turns tasks into costs and routes, runs the SimGrid engine (in a
// forked child by default) and derives the reported quantities from the task times.

#include "compass/backends/sim/simulator.hpp"

#include <cmath>

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <map>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "compass/backends/sim/isolated.hpp"
#include "compass/backends/sim/prepared.hpp"
#include "compass/hardware/gemm_cost.hpp"
#include "compass/hardware/task_costs.hpp"
#include "compass/schedule/prices.hpp"

namespace compass::backends::sim {
namespace detail {
namespace {

using schedule::ResourceKind;
using schedule::TaskKind;

using schedule::in_fused_kernel;

// The Profile's route src->dst: the O(1) slot when routes are sorted as presets keep them, a
// search otherwise; nullptr when the profile has none.
const hardware::Route* find_route(const hardware::Profile& p, int src, int dst,
                                  std::unordered_map<std::int64_t, const hardware::Route*>& index) {
  const auto n = static_cast<std::size_t>(p.gpu_count());
  if (n > 1 && p.routes.size() == n * (n - 1)) {
    const std::size_t i = static_cast<std::size_t>(src) * (n - 1) +
                          static_cast<std::size_t>(dst < src ? dst : dst - 1);
    if (i < p.routes.size() && p.routes[i].src == src && p.routes[i].dst == dst) return &p.routes[i];
  }
  if (index.empty())
    for (const hardware::Route& r : p.routes)
      index.emplace(static_cast<std::int64_t>(r.src) << 32 | static_cast<std::uint32_t>(r.dst), &r);
  auto it = index.find(static_cast<std::int64_t>(src) << 32 | static_cast<std::uint32_t>(dst));
  return it == index.end() ? nullptr : it->second;
}

// schedule::check_on_machine, and no two ranks on one GPU (each GPU is one simulated host).
Status check_input(const hardware::Profile& p, const schedule::Schedule& s) {
  COMPASS_TRY(schedule::check_on_machine(p, s));
  std::vector<int> rank_of_gpu(static_cast<std::size_t>(p.gpu_count()), -1);
  for (int r = 0; r < s.ranks(); ++r) {
    const int g = s.gpus[r];
    if (rank_of_gpu[g] >= 0)
      return make_error("schedule puts ranks {} and {} on the same GPU {}", rank_of_gpu[g], r, g);
    rank_of_gpu[g] = r;
  }
  return Status::success();
}

Result<Prepared> prepare(const hardware::Profile& p, const schedule::Schedule& s,
                         const SimOptions& o) {
  COMPASS_TRY(check_input(p, s));
  Prepared out;
  out.profile = &p;
  out.schedule = &s;
  if (o.interference && s.ranks() > 1)
    out.comm_slowdown = std::max(1.0, p.interference.comm_slowdown_beside_gemm);
  std::unordered_map<std::int64_t, const hardware::Route*> route_index;
  // Flat lookups: a schedule of 10^6 tasks spent over a second here with ordered maps.
  std::unordered_map<std::int64_t, int> route_slot;  // (src GPU, dst GPU) -> index into out.routes
  std::vector<std::int64_t> route_bytes;             // per used route: bytes of its transfers
  // Each serial resource with its tasks in run order (schedule::resource_lanes).
  schedule::ResourceLanes lanes = schedule::resource_lanes(s);
  out.resources = std::move(lanes.resources);
  out.resource_tasks = std::move(lanes.tasks);

  // Every task says how it starts (Task::launch): fused strategies run each rank's GEMM chunks
  // inside one kernel that waits on arrival flags, with copy engines moving data;
  // sequential/decompose run one GEMM kernel per part and NCCL-style collectives (one kernel
  // per collective, reductions inside it, on SMs). GEMMs in fused kernels run beside
  // copy-engine traffic, the others beside collectives on SMs.
  const bool fused_gemms = std::any_of(s.tasks.begin(), s.tasks.end(), in_fused_kernel);
  if (o.interference) out.gemm_slowdown = hardware::gemm_slowdown(p, fused_gemms, s.ranks());
  // Every task's price is the rule the model's timeline reads too (schedule::task_prices).
  COMPASS_ASSIGN(const std::vector<schedule::TaskPrice> prices, schedule::task_prices(p, s));
  out.costs.resize(s.tasks.size());
  for (const schedule::Task& t : s.tasks) {
    TaskCost& c = out.costs[t.id];
    const schedule::TaskPrice& price = prices[t.id];
    c.on_copy_engine = t.resource.kind == ResourceKind::copy_engine;
    c.gemm = t.kind == TaskKind::gemm;
    c.rank = t.resource.rank;

    if (t.kind == TaskKind::gemm) {
      c.gemm_s = price.gemm_s;
      // One launch per GEMM kernel; a fused kernel launches once and then waits on a flag
      // before each further chunk.
      c.fixed_s = price.fixed_s;
      continue;
    }
    const std::int64_t bytes = price.bytes;
    c.src_rank = s.owner(t.src);
    c.dst_rank = s.owner(t.dst);
    const int src_gpu = s.gpus[c.src_rank];
    const int dst_gpu = s.gpus[c.dst_rank];
    if (price.crosses) {
      auto [rit, rfresh] = route_slot.try_emplace(
          static_cast<std::int64_t>(src_gpu) << 32 | static_cast<std::uint32_t>(dst_gpu),
          static_cast<int>(out.routes.size()));
      if (rfresh) {
        const hardware::Route* r = find_route(p, src_gpu, dst_gpu, route_index);
        if (r == nullptr)
          return make_error("profile '{}' has no route from GPU {} to GPU {} (task {} '{}')",
                            p.name, src_gpu, dst_gpu, t.id, t.name);
        double bottleneck = 0;
        double latency = 0;
        for (const hardware::Hop& h : r->hops) {
          if (h.link < 0 || h.link >= static_cast<int>(p.links.size()))
            return make_error("route {}->{} of profile '{}' names link {} which does not exist",
                              src_gpu, dst_gpu, p.name, h.link);
          const double bw = p.hop_bandwidth(h);
          if (!(bw > 0))
            return make_error("link '{}' has no bandwidth in the direction route {}->{} uses",
                              p.links[h.link].name, src_gpu, dst_gpu);
          bottleneck = bottleneck == 0 ? bw : std::min(bottleneck, bw);
          latency += p.links[h.link].latency_s;
        }
        if (r->hops.empty())
          return make_error("route {}->{} of profile '{}' has no hops", src_gpu, dst_gpu, p.name);
        out.routes.push_back(UsedRoute{src_gpu, dst_gpu, r, bottleneck, latency});
        route_bytes.push_back(0);
      }
      c.route = rit->second;
      c.net_bytes = bytes;
      c.fixed_s = price.fixed_s;
      route_bytes[c.route] += bytes;
      continue;
    }
    // Reductions run inside the collective or fused kernel (a flag wait in the latter); copies
    // (and transfers to the same GPU) are one cudaMemcpyAsync each, whatever the stream.
    c.fixed_s = price.fixed_s + price.local_s;
  }

  // Bytes per link direction (index 2 * link + forward): whole numbers below 2^53, so the sums
  // are exact in any order.
  std::vector<double> link_bytes(2 * p.links.size(), 0.0);
  std::vector<char> link_used(2 * p.links.size(), 0);
  for (std::size_t r = 0; r < out.routes.size(); ++r)
    for (const hardware::Hop& h : out.routes[r].route->hops) {
      const std::size_t dir = 2 * static_cast<std::size_t>(h.link) + (h.forward ? 1 : 0);
      link_bytes[dir] += static_cast<double>(route_bytes[r]);
      link_used[dir] = 1;
    }
  // Busiest first; equal byte counts keep (link, reverse before forward) order.
  std::vector<std::size_t> by_bytes;
  for (std::size_t dir = 0; dir < link_bytes.size(); ++dir)
    if (link_used[dir]) by_bytes.push_back(dir);
  std::stable_sort(by_bytes.begin(), by_bytes.end(),
                   [&](std::size_t x, std::size_t y) { return link_bytes[x] > link_bytes[y]; });
  const std::size_t keep = std::min(by_bytes.size(), static_cast<std::size_t>(std::max(0, o.busiest_links)));
  for (std::size_t i = 0; i < keep; ++i)
    out.tracked.push_back(TrackedLink{static_cast<int>(by_bytes[i] / 2), by_bytes[i] % 2 == 1,
                                      link_bytes[by_bytes[i]]});
  return out;
}

// Runs the engine in a forked child and reads its outcome from a pipe.
Result<RawResult> run_isolated(const Prepared& p) {
  const Result<std::string> bytes = run_in_child("simulator", [&p] {
    try {
      return encode(run_engine(p));
    } catch (const std::exception& e) {
      return encode(Result<RawResult>(make_error("simulator: {}", e.what())));
    }
  });
  if (!bytes.ok()) return bytes.error();
  return decode(*bytes);
}

SimResult finish(const hardware::Profile& p, const schedule::Schedule& s, const Prepared& prep,
                 RawResult raw) {
  SimResult out;
  out.tasks = std::move(raw.tasks);
  for (const TaskTime& t : out.tasks) out.total_s = std::max(out.total_s, t.end_s);
  for (std::size_t a = 0; a < prep.resources.size(); ++a) {
    ResourceBusy b;
    b.rank = prep.resources[a].rank;
    b.kind = prep.resources[a].kind;
    b.index = prep.resources[a].index;
    b.tasks = static_cast<int>(prep.resource_tasks[a].size());
    for (int id : prep.resource_tasks[a]) b.busy_s += out.tasks[id].end_s - out.tasks[id].start_s;
    out.resources.push_back(b);
  }
  std::sort(out.resources.begin(), out.resources.end(), [](const auto& x, const auto& y) {
    return std::tie(x.rank, x.kind, x.index) < std::tie(y.rank, y.kind, y.index);
  });
  out.exposed_comm_s_per_rank.assign(s.ranks(), out.total_s);
  for (const ResourceBusy& b : out.resources)
    if (b.kind == schedule::ResourceKind::compute) out.exposed_comm_s_per_rank[b.rank] -= b.busy_s;
  for (double& e : out.exposed_comm_s_per_rank) {
    e = std::max(0.0, e);
    out.exposed_comm_s = std::max(out.exposed_comm_s, e);
  }
  for (const schedule::Task& t : s.tasks) {
    if (prep.costs[t.id].route < 0) continue;
    ++out.transfers;
    out.transferred_bytes += static_cast<double>(prep.costs[t.id].net_bytes);
  }
  for (std::size_t i = 0; i < prep.tracked.size(); ++i) {
    const TrackedLink& tl = prep.tracked[i];
    LinkUse u;
    u.link = tl.link;
    u.forward = tl.forward;
    u.name = p.hop_name(hardware::Hop{tl.link, tl.forward});
    u.bandwidth_bytes_per_s = p.hop_bandwidth(hardware::Hop{tl.link, tl.forward});
    u.bytes = tl.bytes;
    u.samples = i < raw.samples.size() ? std::move(raw.samples[i]) : std::vector<LinkSample>{};
    for (std::size_t k = 0; k < u.samples.size(); ++k) {
      const double end = k + 1 < u.samples.size() ? u.samples[k + 1].t_s : out.total_s;
      if (u.samples[k].utilisation > 1e-12) u.busy_s += end - u.samples[k].t_s;
    }
    if (u.samples.empty() || u.samples.back().utilisation != 0.0)
      u.samples.push_back(LinkSample{out.total_s, 0.0});
    u.busy_fraction = out.total_s > 0 ? u.busy_s / out.total_s : 0.0;
    out.busiest_links.push_back(std::move(u));
  }
  return out;
}

// Little-endian host order is fine: parent and child are the same binary on the same machine.
template <typename T>
void put(std::string& b, const T& v) {
  b.append(reinterpret_cast<const char*>(&v), sizeof v);
}
template <typename T>
bool get(const std::string& b, std::size_t& pos, T& v) {
  if (pos + sizeof v > b.size()) return false;
  std::memcpy(&v, b.data() + pos, sizeof v);
  pos += sizeof v;
  return true;
}

}  // namespace

std::string encode(const Result<RawResult>& r) {
  std::string b;
  if (!r.ok()) {
    put<std::uint8_t>(b, 1);
    put<std::uint64_t>(b, r.error().message.size());
    b += r.error().message;
    return b;
  }
  put<std::uint8_t>(b, 0);
  put<std::uint64_t>(b, r->tasks.size());
  b.reserve(b.size() + r->tasks.size() * 2 * sizeof(double));
  for (const TaskTime& t : r->tasks) {
    put(b, t.start_s);
    put(b, t.end_s);
  }
  put<std::uint64_t>(b, r->samples.size());
  for (const auto& v : r->samples) {
    put<std::uint64_t>(b, v.size());
    for (const LinkSample& x : v) {
      put(b, x.t_s);
      put(b, x.utilisation);
    }
  }
  return b;
}

Result<RawResult> decode(const std::string& b) {
  const Error truncated = make_error("simulator child sent a truncated result ({} bytes)", b.size());
  std::size_t pos = 0;
  std::uint8_t tag = 0;
  std::uint64_t n = 0;
  if (!get(b, pos, tag) || !get(b, pos, n)) return truncated;
  if (tag == 1) {
    if (pos + n > b.size()) return truncated;
    return Error{b.substr(pos, n)};
  }
  RawResult r;
  if (n > b.size()) return truncated;
  r.tasks.resize(n);
  for (TaskTime& t : r.tasks)
    if (!get(b, pos, t.start_s) || !get(b, pos, t.end_s)) return truncated;
  if (!get(b, pos, n) || n > b.size()) return truncated;
  r.samples.resize(n);
  for (auto& v : r.samples) {
    std::uint64_t m = 0;
    if (!get(b, pos, m) || m > b.size()) return truncated;
    v.resize(m);
    for (LinkSample& x : v)
      if (!get(b, pos, x.t_s) || !get(b, pos, x.utilisation)) return truncated;
  }
  return r;
}

}  // namespace detail

bool compiled_in() { return true; }

Status check(const hardware::Profile& profile, const schedule::Schedule& s) {
  return detail::check_input(profile, s);
}

Prepared::Prepared(std::unique_ptr<detail::Prepared> prep, const hardware::Profile& profile,
                   const schedule::Schedule& s, const SimOptions& options)
    : prep_(std::move(prep)), profile_(&profile), s_(&s), options_(options) {}
Prepared::Prepared(Prepared&&) noexcept = default;
Prepared& Prepared::operator=(Prepared&&) noexcept = default;
Prepared::~Prepared() = default;

Result<Prepared> Prepared::create(const hardware::Profile& profile, const schedule::Schedule& s,
                                  const SimOptions& options) {
  COMPASS_ASSIGN(detail::Prepared prep, detail::prepare(profile, s, options));
  return Prepared(std::make_unique<detail::Prepared>(std::move(prep)), profile, s, options);
}

Result<SimResult> Prepared::simulate() const {
  COMPASS_ASSIGN(detail::RawResult raw,
                 options_.isolate ? detail::run_isolated(*prep_) : detail::run_engine(*prep_));
  if (raw.tasks.size() != s_->tasks.size())
    return make_error("simulator returned {} task times for {} tasks", raw.tasks.size(),
                      s_->tasks.size());
  SimResult r = detail::finish(*profile_, *s_, *prep_, std::move(raw));
  if (!std::isfinite(r.total_s) || r.total_s < 0 || !std::isfinite(r.exposed_comm_s))
    return make_error("simulating {} under {}: the simulated time is not finite; check the "
                      "numbers of profile '{}'",
                      workload::describe(s_->op), schedule::to_string(s_->strategy),
                      profile_->name);
  return r;
}

Result<Measurement> Prepared::run(const RunOptions& o) const {
  COMPASS_TRY(check_options(o));
  COMPASS_ASSIGN(const SimResult r, simulate());
  return measurement(r);
}

backends::Measurement measurement(const SimResult& r) {
  backends::Measurement m;
  m.times_s = {r.total_s};
  backends::summarise_times(m);
  m.resources = r.resources;
  return m;
}

Result<SimResult> simulate(const hardware::Profile& profile, const schedule::Schedule& s,
                           const SimOptions& options) {
  COMPASS_ASSIGN(const Prepared prep, Prepared::create(profile, s, options));
  return prep.simulate();
}

double isolated_task_time_s(const hardware::Profile& profile, const schedule::Schedule& s,
                            const schedule::Task& t) {
  auto prep = detail::prepare(profile, s, SimOptions{});
  if (!prep.ok()) return 0.0;
  const detail::TaskCost& c = prep->costs.at(t.id);
  double time_s = c.fixed_s + c.gemm_s;
  if (c.route >= 0) {
    const detail::UsedRoute& r = prep->routes[c.route];
    time_s += r.latency_s + static_cast<double>(c.net_bytes) / r.bottleneck_bytes_per_s;
  }
  return time_s;
}

}  // namespace compass::backends::sim
