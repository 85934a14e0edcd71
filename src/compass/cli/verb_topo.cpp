// compass topo [--profile] <preset|file.json> [--tp N] [--gpus 0,1,..] [--size BYTES] [--json]:
// the machine (devices, nodes, links), the topology-aware ring and double ring for a TP group,
// and the all-gather time of each communication pattern (rings, all-to-all, the tree patterns)
// with its bottleneck and, for all-to-all, the congested link directions; --sim also simulates
// the tree patterns' chunked all-gather schedules; --random SEED uses a random machine.

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "compass/cli/common.hpp"
#include "compass/hardware/cut_bound.hpp"
#include "compass/hardware/random_topology.hpp"
#include "compass/hardware/rings.hpp"
#include "compass/hardware/synthesis.hpp"
#include "compass/schedule/patterns.hpp"
#include "compass/backends/sim/simulator.hpp"

namespace compass::cli {

namespace {

using hardware::DoubleRing;
using hardware::PatternTime;
using hardware::Profile;
using hardware::Ring;

struct TopoOptions {
  std::string positional;
  std::string profile;
  int tp = 0;
  std::string gpus;
  double size_bytes = 1024.0 * 1024.0 * 1024.0;
  JsonOutput json;
  bool force = false;
  bool sim = false;
  long long random_seed = -1;  // >= 0: a random machine of --tp GPUs
};

// A tree pattern's simulated all-gather.
struct TreeSim {
  std::string pattern;
  double time_s = 0;
  int trees = 0;
  int depth = 0;
  // The direction whose bytes take longest at full bandwidth (the pattern's bottleneck by
  // load; among ties the one that moved data longest): that time, and how long it moved data.
  std::string neck;
  double neck_full_s = 0;
  double neck_busy_s = 0;
};

// The simulated bottleneck direction of a tree all-gather (see TreeSim).
void set_neck(TreeSim& t, const backends::sim::SimResult& res) {
  for (const backends::sim::LinkUse& l : res.busiest_links) {
    if (!(l.bandwidth_bytes_per_s > 0)) continue;
    const double full = l.bytes / l.bandwidth_bytes_per_s;
    const double tol = 1e-9 * std::max(full, t.neck_full_s);
    if (full > t.neck_full_s + tol ||
        (full >= t.neck_full_s - tol && l.busy_s > t.neck_busy_s)) {
      t.neck = l.name;
      t.neck_full_s = full;
      t.neck_busy_s = l.busy_s;
    }
  }
}

struct TopoReport {
  Profile profile;
  std::vector<int> group;
  Ring ring;
  DoubleRing double_ring;
  std::vector<PatternTime> patterns;  // ring, double-ring, all2all, hier, synth
  hardware::CutBound bound;           // all-gather lower bound from cuts
  std::vector<TreeSim> sims;          // --sim: hier, synth
};

std::string bound_ratio(double t_s, double bound_s) {
  return bound_s > 0 ? fmt::format("{:.2f}", t_s / bound_s) : "-";
}

std::string ring_text(const Ring& r) {
  if (r.order.size() == 1) return fmt::format("{} (one GPU: nothing to exchange)", r.order[0]);
  std::string s;
  for (int g : r.order) s += fmt::format("{} -> ", g);
  return r.order.empty() ? s : s + std::to_string(r.order.front());
}

std::string join_ints(const std::vector<int>& v) {
  std::string s;
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s;
}

double busy_of(const PatternTime& t, const std::string& name) {
  for (const hardware::HopLoad& l : t.loads)
    if (l.name == name) return l.busy_s;
  return 0;
}

void print_human(const TopoReport& r, double size_bytes) {
  const Profile& p = r.profile;
  out("machine: {}\n", p.name);
  if (!p.description.empty()) out("  {}\n", p.description);
  std::string pairs;
  for (const auto& [x, y] : p.p2p_pairs)
    pairs += fmt::format("{}{}-{}", pairs.empty() ? "" : ", ", p.nodes[p.gpu_node(x)].name,
                         p.nodes[p.gpu_node(y)].name);
  out("  peer-to-peer: {}\n",
             p.p2p ? "yes"
                   : pairs.empty() ? std::string("no (staged through host memory)")
                                   : "only " + pairs + " (the rest staged through host memory)");
  for (const std::string& n : p.notes) out("  note: {}\n", n);

  out("\ndevices:\n");
  out("  {:<16} {:<6} {:>4} {:>10} {:>12} {:>3}  {}\n", "NAME", "ARCH", "SMS", "MEMORY",
             "MEM BW", "CE", "PEAK");
  for (const hardware::DeviceSpec& d : p.devices) {
    std::string peak;
    for (const auto& [dtype, flops] : d.peak_flops)
      peak += fmt::format("{}{} {:.1f} TFLOP/s", peak.empty() ? "" : ", ", to_string(dtype),
                          flops / 1e12);
    out("  {:<16} {:<6} {:>4} {:>10} {:>12} {:>3}  {}\n", d.name, d.arch, d.sm_count,
               format_bytes(d.memory_bytes), format_bandwidth(d.memory_bandwidth_bytes_per_s),
               d.copy_engines, peak);
  }

  out("\nnodes ({}):\n", p.nodes.size());
  out("  {:<4} {:<16} {:<13} {}\n", "ID", "NAME", "KIND", "DEVICE");
  for (std::size_t i = 0; i < p.nodes.size(); ++i)
    out("  {:<4} {:<16} {:<13} {}\n", i, p.nodes[i].name, to_string(p.nodes[i].kind),
               p.nodes[i].device);

  out("\nlinks ({}):\n", p.links.size());
  out("  {:<18} {:<12} {:<28} {:>11} {:>11} {:>9}  {}\n", "NAME", "KIND", "A <-> B", "A->B",
             "B->A", "LATENCY", "SHARED");
  for (const hardware::Link& l : p.links)
    out("  {:<18} {:<12} {:<28} {:>11} {:>11} {:>9}  {}\n", l.name, to_string(l.kind),
               fmt::format("{} <-> {}", p.nodes[l.a].name, p.nodes[l.b].name),
               format_bandwidth(l.bandwidth_bytes_per_s),
               format_bandwidth(l.reverse_bandwidth_bytes_per_s), format_seconds(l.latency_s),
               l.shared ? "yes" : "no");

  out("\ngroup: {} GPU{} ({})\n", r.group.size(), r.group.size() == 1 ? "" : "s",
             join_ints(r.group));
  out("ring:        {}\n", ring_text(r.ring));
  out("double ring: {}\n", ring_text(r.double_ring.first));
  out("             {}\n", ring_text(r.double_ring.second));

  out(
      "\nall-gather of {} ({} per rank), max-min link sharing (speedup = ring time / time):\n",
      format_bytes(size_bytes), format_bytes(size_bytes / static_cast<double>(r.group.size())));
  const double ring_s = r.patterns.front().time_s;
  const hardware::CutBound& b = r.bound;
  if (b.time_s > 0) {
    std::string cut;
    for (const std::string& h : b.cut_hops) cut += (cut.empty() ? "" : ", ") + h;
    out("  lower bound (cuts, {}): {}: {} {} at most {} (min cut: {})\n",
               b.exact ? "every subset" : "candidate subsets", format_seconds(b.time_s),
               format_bytes(b.bytes), b.crossing, format_bandwidth(b.capacity_bytes_per_s), cut);
  }
  out("  {:<12} {:>11} {:>8} {:>6}  {}\n", "PATTERN", "TIME", "SPEEDUP", "/BOUND",
             "BOTTLENECK (busy time)");
  for (const PatternTime& t : r.patterns) {
    std::string neck = t.bottleneck.empty() ? "-"
                                            : fmt::format("{} ({})", t.bottleneck,
                                                          format_seconds(busy_of(t, t.bottleneck)));
    std::string ratio = t.time_s > 0 ? fmt::format("{:.2f}x", ring_s / t.time_s) : "-";
    out("  {:<12} {:>11} {:>8} {:>6}  {}\n", t.pattern, format_seconds(t.time_s), ratio,
               bound_ratio(t.time_s, b.time_s), neck);
  }

  out("  (hier, synth: busiest direction's busy time, reached with perfect pipelining)\n");
  if (!r.sims.empty()) {
    out("\nsimulated all-gather along the trees (SimGrid, chunked as fuse:hier/fuse:synth "
               "run it):\n");
    out("  {:<12} {:>11} {:>8} {:>6} {:>6} {:>6}  {}\n", "PATTERN", "TIME", "SPEEDUP",
               "/BOUND", "TREES", "DEPTH", "BOTTLENECK (full-rate time, time moving data, use)");
    for (const TreeSim& t : r.sims)
      out("  {:<12} {:>11} {:>7.2f}x {:>6} {:>6} {:>6}  {} ({}, {}, {:.1f}%)\n", t.pattern,
                 format_seconds(t.time_s), ring_s / t.time_s, bound_ratio(t.time_s, b.time_s),
                 t.trees, t.depth, t.neck, format_seconds(t.neck_full_s),
                 format_seconds(t.neck_busy_s),
                 t.neck_busy_s > 0 ? 100 * t.neck_full_s / t.neck_busy_s : 0.0);
    out("  (use: full-rate time / time moving data, the bottleneck's mean use while it moves "
               "data; idle for TIME minus the time moving data)\n");
  }

  const PatternTime& a2a = r.patterns[2];
  out("\nall2all congested link directions (busier than the ring's busiest direction):\n");
  if (a2a.congested.empty()) out("  none\n");
  for (const std::string& name : a2a.congested)
    out("  {:<40} busy {}\n", name, format_seconds(busy_of(a2a, name)));
}

nlohmann::ordered_json pattern_json(const PatternTime& t, double bound_s) {
  nlohmann::ordered_json loads = nlohmann::ordered_json::array();
  for (const hardware::HopLoad& l : t.loads)
    loads.push_back({{"name", l.name},
                     {"link", l.hop.link},
                     {"forward", l.hop.forward},
                     {"bytes", l.bytes},
                     {"flows", l.flows},
                     {"busy_s", l.busy_s}});
  return {{"pattern", t.pattern},
          {"time_s", t.time_s},
          {"time_over_bound", bound_s > 0 ? nlohmann::ordered_json(t.time_s / bound_s)
                                          : nlohmann::ordered_json(nullptr)},
          {"bottleneck", t.bottleneck},
          {"congested", t.congested},
          {"loads", loads}};
}

nlohmann::ordered_json topo_json(const TopoReport& r, double size_bytes) {
  const Profile& p = r.profile;
  nlohmann::ordered_json out;
  out["machine"] = p.name;
  out["description"] = p.description;
  out["p2p"] = p.p2p;
  out["notes"] = p.notes;
  nlohmann::ordered_json devices = nlohmann::ordered_json::array();
  for (const hardware::DeviceSpec& d : p.devices) {
    nlohmann::ordered_json peak = nlohmann::ordered_json::object();
    for (const auto& [dtype, flops] : d.peak_flops) peak[std::string(to_string(dtype))] = flops;
    devices.push_back({{"name", d.name},
                       {"arch", d.arch},
                       {"sm_count", d.sm_count},
                       {"memory_bytes", d.memory_bytes},
                       {"memory_bandwidth_bytes_per_s", d.memory_bandwidth_bytes_per_s},
                       {"copy_engines", d.copy_engines},
                       {"peak_flops", peak}});
  }
  out["devices"] = devices;
  nlohmann::ordered_json nodes = nlohmann::ordered_json::array();
  for (const hardware::Node& n : p.nodes)
    nodes.push_back(
        {{"name", n.name}, {"kind", std::string(to_string(n.kind))}, {"device", n.device}});
  out["nodes"] = nodes;
  nlohmann::ordered_json links = nlohmann::ordered_json::array();
  for (const hardware::Link& l : p.links)
    links.push_back({{"name", l.name},
                     {"kind", std::string(to_string(l.kind))},
                     {"a", p.nodes[l.a].name},
                     {"b", p.nodes[l.b].name},
                     {"bandwidth_bytes_per_s", l.bandwidth_bytes_per_s},
                     {"reverse_bandwidth_bytes_per_s", l.reverse_bandwidth_bytes_per_s},
                     {"latency_s", l.latency_s},
                     {"shared", l.shared}});
  out["links"] = links;
  out["group"] = r.group;
  out["ring"] = r.ring.order;
  out["double_ring"] = {{"first", r.double_ring.first.order},
                        {"second", r.double_ring.second.order}};
  out["allgather_bytes"] = size_bytes;
  out["bound"] = {{"time_s", r.bound.time_s},
                  {"subset", r.bound.subset},
                  {"crossing", r.bound.crossing},
                  {"bytes", r.bound.bytes},
                  {"capacity_bytes_per_s", r.bound.capacity_bytes_per_s},
                  {"cut", r.bound.cut_hops},
                  {"exact", r.bound.exact}};
  nlohmann::ordered_json patterns = nlohmann::ordered_json::array();
  for (const PatternTime& t : r.patterns) patterns.push_back(pattern_json(t, r.bound.time_s));
  out["patterns"] = patterns;
  nlohmann::ordered_json sims = nlohmann::ordered_json::array();
  for (const TreeSim& t : r.sims)
    sims.push_back({{"pattern", t.pattern},
                    {"time_s", t.time_s},
                    {"time_over_bound", r.bound.time_s > 0 ? t.time_s / r.bound.time_s : 0.0},
                    {"trees", t.trees},
                    {"depth", t.depth},
                    {"bottleneck", t.neck},
                    {"bottleneck_full_rate_s", t.neck_full_s},
                    {"bottleneck_moving_s", t.neck_busy_s}});
  if (!r.sims.empty()) out["simulated"] = sims;
  return out;
}

void run_topo(const TopoOptions& o) {
  o.json.check_writable(o.force);
  if (!o.positional.empty() && !o.profile.empty() && o.positional != o.profile)
    throw UsageError(
        fmt::format("two profiles given: '{}' and --profile '{}'", o.positional, o.profile));
  const std::string which =
      !o.profile.empty() ? o.profile : (!o.positional.empty() ? o.positional : "a6000x8");
  if (!(o.size_bytes > 0) || !(o.size_bytes <= 1e18))
    throw UsageError(fmt::format("--size: must be in (0, 1e18] bytes, got {}", o.size_bytes));

  TopoReport r;
  if (o.random_seed >= 0) {
    if (!o.profile.empty() || !o.positional.empty())
      throw UsageError("--random: give either a profile or --random SEED, not both");
    if (o.tp < 1 || o.tp > 64) throw UsageError("--random: needs --tp between 1 and 64");
    r.profile = hardware::random_topology(static_cast<std::uint64_t>(o.random_seed), o.tp);
  } else {
    r.profile = load_profile(which);
  }
  r.group = select_group(r.profile, o.tp, o.gpus);
  unwrap(hardware::validate_group(r.profile, r.group));
  r.ring = unwrap(hardware::find_ring(r.profile, r.group));
  r.double_ring = unwrap(hardware::find_double_ring(r.profile, r.group));
  r.patterns.push_back(hardware::allgather_time_ring(r.profile, r.ring, o.size_bytes));
  r.patterns.push_back(
      hardware::allgather_time_double_ring(r.profile, r.double_ring, o.size_bytes));
  r.patterns.push_back(hardware::allgather_time_all2all(r.profile, r.group, o.size_bytes));
  const hardware::TreePattern trees[] = {
      unwrap(hardware::hierarchical_pattern(r.profile, r.group)),
      unwrap(hardware::synthesize_pattern(r.profile, r.group))};
  for (const hardware::TreePattern& t : trees)
    r.patterns.push_back(hardware::allgather_load_pattern(r.profile, t, o.size_bytes));
  r.bound = unwrap(hardware::allgather_cut_bound(r.profile, r.group, o.size_bytes));
  if (o.sim && !backends::sim::compiled_in())
    throw UsageError("--sim: this build has no simulator (configure with -DCOMPASS_WITH_SIM=ON)");
  if (o.sim && r.group.size() >= 2) {
    int engines = 0;
    for (int g : r.group) {
      const int ce = std::max(1, r.profile.gpu_device(g).copy_engines);
      engines = engines == 0 ? ce : std::min(engines, ce);
    }
    // BF16 rows of 8192 elements; the shard is rounded down to whole rows.
    constexpr std::int64_t kCols = 8192;
    const std::int64_t rows = static_cast<std::int64_t>(
        o.size_bytes / static_cast<double>(r.group.size()) / (kCols * 2));
    if (rows < 1) throw UsageError("--sim: --size is too small for one 16 KiB row per rank");
    for (const hardware::TreePattern& t : trees) {
      const schedule::TreePlan plan = unwrap(schedule::tree_plan_from(r.profile, t, r.group));
      const schedule::Schedule s =
          unwrap(schedule::tree_allgather(plan, r.group, engines, rows, kCols));
      backends::sim::SimOptions so;
      so.busiest_links = std::numeric_limits<int>::max();
      const backends::sim::SimResult res = unwrap(backends::sim::simulate(r.profile, s, so));
      TreeSim ts{t.name, res.total_s, static_cast<int>(t.trees.size()),
                 hardware::pattern_depth(t), "", 0, 0};
      set_neck(ts, res);
      r.sims.push_back(std::move(ts));
    }
  }
  if (o.json.any()) o.json.emit(topo_json(r, o.size_bytes), o.force);
  if (!o.json.to_stdout()) print_human(r, o.size_bytes);
}

}  // namespace

void add_topo_verb(CLI::App& app) {
  auto opts = std::make_shared<TopoOptions>();
  auto* sub = app.add_subcommand(
      "topo",
      "Show a machine's topology, the topology-aware ring and double ring for a TP group, "
      "and each all-gather pattern's time and bottleneck");
  sub->add_option("profile", opts->positional,
                  "Preset name or profile JSON file (default a6000x8)")
      ->check(non_empty("profile name"));
  sub->add_option("--profile", opts->profile,
                  "Preset name or profile JSON file (same as the positional)")
      ->check(non_empty("profile name"));
  sub->add_option("--tp", opts->tp, "TP degree: GPUs 0..N-1 (default: every GPU)")
      ->transform(positive_tp());
  sub->add_option("--gpus", opts->gpus, "Explicit TP group, e.g. 0,1,4,5")->check(nonempty_gpus());
  sub->add_option("--size", opts->size_bytes, "All-gather size in bytes (default 1 GiB)");
  opts->json.add_to(sub, "the machine, its rings and the patterns' times");
  add_force_flag(sub, opts->force, "--json-out");
  sub->add_flag("--sim", opts->sim,
                "Also simulate the tree patterns' all-gather schedules (SimGrid); the size is "
                "rounded down to whole 16 KiB rows per rank");
  add_integer_option(sub, "--random", opts->random_seed,
                     "Use a random machine of --tp GPUs drawn from this seed instead of a profile",
                     0);
  sub->callback([opts] { run_topo(*opts); });
}

}  // namespace compass::cli
