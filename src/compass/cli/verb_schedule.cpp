// compass schedule --op K --m M --n N --k K --tp P [--dtype bf16] [--strategy S] [--profile P]
// [--limit N] [--json]: builds the task graph of one operator under one strategy on the
// topology-aware rings of GPUs 0..P-1 of the profile, and prints a summary (tasks per rank and
// resource, bytes per sender->receiver pair, the first tasks) or the schedule JSON
// (docs/schedule.md).

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "compass/cli/common.hpp"
#include "compass/schedule/generate.hpp"

namespace compass::cli {

namespace {

using schedule::Schedule;
using schedule::Task;

struct ScheduleArgs {
  std::string op;
  std::int64_t m = 0, n = 0, k = 0;
  int tp = 0;
  std::string gpus;
  std::string dtype = "bf16";
  std::string strategy = "sequential";
  std::string profile = "a6000x8";
  int limit = 40;
  JsonOutput json;
  bool force = false;
};

std::string ring_text(const std::vector<int>& ring) {
  std::string s;
  for (int r : ring) s += fmt::format("{} -> ", r);
  return ring.empty() ? s : s + std::to_string(ring.front());
}

std::string region_text(const Schedule& s, const schedule::Region& r) {
  const schedule::Buffer& b = s.buffers.at(static_cast<std::size_t>(r.buffer));
  return fmt::format("r{}.{}[{}:{}]", b.rank, b.name, r.row, r.row + r.rows);
}

std::string resource_text(const schedule::Resource& r) {
  return r.kind == schedule::ResourceKind::compute ? "compute" : fmt::format("ce{}", r.index);
}

void print_human(const Schedule& s, const schedule::CommPlan& plan, const std::string& profile,
                 int limit) {
  out("schedule: {}, strategy {}, profile {}\n", workload::describe(s.op),
             schedule::to_string(s.strategy), profile);
  std::string gpus;
  for (std::size_t i = 0; i < s.gpus.size(); ++i)
    gpus += fmt::format("{}r{}=gpu{}", i ? " " : "", i, s.gpus[i]);
  out("ranks: {}\n", gpus);
  out("ring (ranks):  {}\n", ring_text(plan.ring));
  out("ring2 (ranks): {}\n", ring_text(plan.ring2));
  out("copy engines used: {}\n", s.copy_engines);

  out("\nbuffers of rank 0 (every rank has the same):\n");
  for (const schedule::Buffer& b : s.buffers)
    if (b.rank == 0)
      out("  {:<6} {:>7} x {:<7} {}\n", b.name, b.rows, b.cols, schedule::to_string(b.role));

  // Per rank and resource: task counts by kind, bytes moved and GEMM FLOPs.
  struct Load {
    int tasks = 0, transfers = 0, gemms = 0, adds = 0, copies = 0;
    std::int64_t bytes = 0;
    double flops = 0;
  };
  std::map<std::tuple<int, int, int>, Load> loads;
  std::map<std::pair<int, int>, std::int64_t> link_bytes;
  for (const Task& t : s.tasks) {
    Load& l = loads[{t.resource.rank, static_cast<int>(t.resource.kind), t.resource.index}];
    ++l.tasks;
    l.bytes += schedule::task_bytes(s, t);
    l.flops += schedule::task_flops(t, s);
    switch (t.kind) {
      case schedule::TaskKind::transfer:
        ++l.transfers;
        link_bytes[{s.owner(t.src), s.owner(t.dst)}] += schedule::task_bytes(s, t);
        break;
      case schedule::TaskKind::gemm:
        ++l.gemms;
        break;
      case schedule::TaskKind::add:
        ++l.adds;
        break;
      case schedule::TaskKind::copy:
        ++l.copies;
        break;
    }
  }
  out("\ntasks: {}\n", s.tasks.size());
  out("  {:<5} {:<8} {:>6} {:>9} {:>6} {:>5} {:>5} {:>14} {:>10}\n", "RANK", "RESOURCE",
             "TASKS", "TRANSFER", "GEMM", "ADD", "COPY", "BYTES", "GFLOP");
  for (const auto& [key, l] : loads) {
    const auto [rank, kind, index] = key;
    out("  {:<5} {:<8} {:>6} {:>9} {:>6} {:>5} {:>5} {:>14} {:>10.4g}\n", rank,
               resource_text({rank, static_cast<schedule::ResourceKind>(kind), index}), l.tasks,
               l.transfers, l.gemms, l.adds, l.copies, l.bytes, l.flops / 1e9);
  }

  out("\nbytes per link (sender -> receiver):\n");
  if (link_bytes.empty()) out("  none\n");
  for (const auto& [pair, bytes] : link_bytes)
    out("  r{} -> r{}  {:>14}  ({})\n", pair.first, pair.second, bytes,
               format_bytes(static_cast<double>(bytes)));

  const std::size_t shown = std::min(s.tasks.size(), static_cast<std::size_t>(limit));
  out("\ntask list ({} of {}; --limit changes this, --json prints all):\n", shown,
             s.tasks.size());
  out("  {:>4}  {:<8} {:<11} {:<28} {:<36} {}\n", "ID", "KIND", "RESOURCE", "NAME", "DATA",
             "DEPS");
  for (std::size_t i = 0; i < shown; ++i) {
    const Task& t = s.tasks[i];
    std::string data;
    switch (t.kind) {
      case schedule::TaskKind::gemm:
        data = fmt::format("{} = {} * {}", region_text(s, t.dst), region_text(s, t.src),
                           region_text(s, t.b));
        break;
      case schedule::TaskKind::add:
        data = fmt::format("{} += {}", region_text(s, t.dst), region_text(s, t.src));
        break;
      default:
        data = fmt::format("{} := {}", region_text(s, t.dst), region_text(s, t.src));
    }
    std::string deps;
    for (std::size_t d = 0; d < t.deps.size(); ++d)
      deps += fmt::format("{}{}", d ? "," : "", t.deps[d]);
    out("  {:>4}  {:<8} {:<11} {:<28} {:<36} {}\n", t.id, schedule::to_string(t.kind),
               fmt::format("r{}.{}", t.resource.rank, resource_text(t.resource)), t.name, data,
               deps.empty() ? "-" : deps);
  }
}

void run_schedule(const ScheduleArgs& a) {
  a.json.check_writable(a.force);
  if (a.tp == 0 && a.gpus.empty()) throw UsageError("--tp or --gpus is required");
  const int tp = a.tp == 0 ? static_cast<int>(parse_gpu_list(a.gpus).size()) : a.tp;
  const workload::OperatorSpec op = operator_from_flags(a.op, a.m, a.n, a.k, tp, a.dtype);
  if (a.limit < 0) throw UsageError(fmt::format("--limit: must not be negative, got {}", a.limit));
  if (a.strategy == "all")
    throw UsageError(
        "--strategy all: a schedule is for one strategy (sequential, decompose:D, fuse:all2all, "
        "fuse:ring or fuse:double-ring)");
  const schedule::Strategy strategy = unwrap(schedule::parse_strategy(a.strategy));
  unwrap(workload::validate(op));

  const hardware::Profile profile = load_profile(a.profile);
  const std::vector<int> group = select_group(profile, tp, a.gpus);
  const schedule::CommPlan plan = unwrap(schedule::comm_plan_for(profile, group));
  const Schedule s = unwrap(schedule::generate_for(profile, op, strategy, plan));
  if (a.json.any()) a.json.emit_text(schedule::schedule_to_json(s), a.force);
  if (!a.json.to_stdout()) print_human(s, plan, profile.name, a.limit);
}

}  // namespace

void add_schedule_verb(CLI::App& app) {
  auto args = std::make_shared<ScheduleArgs>();
  auto* sub = app.add_subcommand(
      "schedule",
      "Build the task graph of one operator under one strategy (on the topology-aware rings of "
      "GPUs 0..tp-1) and print a summary or, with --json, the schedule (docs/schedule.md).");
  sub->add_option("--op", args->op, "ag_gemm, gemm_rs or gemm_ar")->required();
  add_integer_option(sub, "--m", args->m, "tokens M (global rows)", 1)->required();
  add_integer_option(sub, "--n", args->n, "output features N", 1)->required();
  add_integer_option(sub, "--k", args->k, "input features K", 1)->required();
  sub->add_option("--tp", args->tp, "tensor-parallel degree p (default: the size of --gpus)")
      ->transform(positive_tp());
  sub->add_option("--gpus", args->gpus,
                  "GPU ordinals of the TP group, e.g. 0,1,4,5 (default 0..tp-1)")
      ->check(nonempty_gpus());
  sub->add_option("--dtype", args->dtype, "element type: fp32, fp16, bf16, fp8")
      ->capture_default_str();
  sub->add_option("--strategy", args->strategy,
                  "sequential, decompose:D, fuse:all2all, fuse:ring, fuse:double-ring, fuse:hier or "
                  "fuse:synth")
      ->capture_default_str();
  sub->add_option("--profile", args->profile, "machine: a preset name or a profile JSON file")
      ->capture_default_str();
  add_integer_option(sub, "--limit", args->limit, "tasks to list in the human output", 0)
      ->capture_default_str();
  args->json.add_to(sub, "the schedule");
  add_force_flag(sub, args->force, "--json-out");
  sub->callback([args] { run_schedule(*args); });
}

}  // namespace compass::cli
