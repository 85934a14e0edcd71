// compass simulate: runs one operator's schedule (or every strategy's) on the SimGrid model of a
// machine and reports the simulated time and where it went.

#include <nlohmann/json.hpp>

#include "compass/cli/common.hpp"
#include "compass/schedule/generate.hpp"
#include "compass/workload/operator.hpp"

#include "compass/backends/sim/simulator.hpp"
#include "compass/study/run_operator.hpp"

namespace compass::cli {
namespace {

struct SimulateArgs {
  std::string profile = "a6000x8";
  std::string op = "ag_gemm";
  std::int64_t m = 0, n = 0, k = 0;
  int tp = 0;
  std::string gpus;
  std::string strategy = "all";
  std::string dtype = "bf16";
  std::string trace;
  int busiest = 4;
  bool force = false;
  JsonOutput json;
};

namespace sim = backends::sim;

std::string resource_label(const sim::ResourceBusy& b) {
  return b.kind == schedule::ResourceKind::compute
             ? fmt::format("r{} compute", b.rank)
             : fmt::format("r{} copy engine {}", b.rank, b.index);
}

void print_single(std::FILE* out, const hardware::Profile& prof, const schedule::Schedule& s,
                  const sim::SimResult& r) {
  print_to(out, "simulated {} on {} (GPUs {}), strategy {}\n", workload::describe(s.op), prof.name,
             fmt::join(s.gpus, ","), schedule::to_string(s.strategy));
  print_to(out, "  total            {}\n", format_seconds(r.total_s));
  print_to(out, "  exposed comm     {} (worst rank: compute stream idle)\n",
             format_seconds(r.exposed_comm_s));
  print_to(out, "  transfers        {} ({})\n\n", r.transfers, format_bytes(r.transferred_bytes));
  print_to(out, "  {:<20} {:>6} {:>12} {:>7}\n", "resource", "tasks", "busy", "busy %");
  for (const sim::ResourceBusy& b : r.resources)
    print_to(out, "  {:<20} {:>6} {:>12} {:>7.1f}\n", resource_label(b), b.tasks,
               format_seconds(b.busy_s), r.total_s > 0 ? 100.0 * b.busy_s / r.total_s : 0.0);
  if (r.busiest_links.empty()) return;
  print_to(out, "\n  {:<28} {:>11} {:>11} {:>7} {:>7}\n", "busiest links", "bandwidth", "bytes",
             "busy %", "util %");
  for (const sim::LinkUse& l : r.busiest_links)
    print_to(out, "  {:<28} {:>11} {:>11} {:>7.1f} {:>7.1f}\n", l.name,
               format_bandwidth(l.bandwidth_bytes_per_s), format_bytes(l.bytes),
               100.0 * l.busy_fraction,
               r.total_s > 0 ? 100.0 * l.bytes / l.bandwidth_bytes_per_s / r.total_s : 0.0);
}

void run_simulate(const SimulateArgs& a) {
  a.json.check_writable(a.force);
  const hardware::Profile prof = load_profile(a.profile);
  const auto kind = workload::parse_op_kind(a.op);
  if (!kind) throw UsageError(fmt::format("--op: unknown operator '{}' (ag_gemm, gemm_rs, gemm_ar)", a.op));
  const auto dtype = parse_dtype(a.dtype);
  if (!dtype) throw UsageError(fmt::format("--dtype: unknown type '{}' (fp32, fp16, bf16, fp8)", a.dtype));
  if (a.busiest < 0) throw UsageError(fmt::format("--links: must be >= 0, got {}", a.busiest));
  const std::vector<int> gpus = select_group(prof, a.tp, a.gpus);
  workload::OperatorSpec op;
  op.kind = *kind;
  op.m = a.m;
  op.n = a.n;
  op.k = a.k;
  op.tp = static_cast<int>(gpus.size());
  op.dtype = *dtype;
  unwrap(workload::validate(op));

  if (a.strategy == "all" && !a.trace.empty())
    throw UsageError("--trace needs a single --strategy, not 'all'");
  if (a.strategy != "all") unwrap(schedule::parse_strategy(a.strategy));
  const OutputFile trace{"--trace", a.trace};
  check_outputs({trace, {"--json-out", a.json.file()}}, a.force);
  if (a.trace == "-" && a.json.to_stdout())
    throw UsageError("--trace - and --json both write to stdout");
  const schedule::CommPlan plan = unwrap(schedule::comm_plan_for(prof, gpus));
  // The same strategies as `compass run --strategy all` (study::strategies_to_run).
  const std::vector<schedule::Strategy> strategies =
      unwrap(study::strategies_to_run(a.strategy, prof, op, plan));
  sim::SimOptions opts;
  opts.busiest_links = a.busiest;

  if (strategies.size() == 1) {
    const schedule::Schedule s = unwrap(schedule::generate_for(prof, op, strategies[0], plan));
    const sim::SimResult r = unwrap(sim::simulate(prof, s, opts));
    // The trace and the JSON are written together or not at all.
    StagedOutputs outputs;
    outputs.add(trace, sim::trace_to_json(r, s), a.force);
    if (a.json.any()) a.json.stage_text(outputs, sim::sim_result_to_json(r, s), a.force);
    outputs.commit();
    if (!a.json.to_stdout()) print_single(a.trace == "-" ? stderr : stdout, prof, s, r);
    return;
  }

  struct Row {
    schedule::Strategy strategy;
    sim::SimResult result;
  };
  std::vector<Row> rows;
  for (const schedule::Strategy& st : strategies) {
    const schedule::Schedule s = unwrap(schedule::generate_for(prof, op, st, plan));
    rows.push_back(Row{st, unwrap(sim::simulate(prof, s, opts))});
  }
  double best = rows.front().result.total_s;
  for (const Row& r : rows) best = std::min(best, r.result.total_s);
  if (a.json.any()) {
    nlohmann::json out;
    out["operator"] = workload::describe(op);
    out["profile"] = prof.name;
    out["gpus"] = gpus;
    nlohmann::json list = nlohmann::json::array();
    for (const Row& r : rows) {
      nlohmann::json j = {{"strategy", schedule::to_string(r.strategy)},
                          {"total_s", r.result.total_s},
                          {"exposed_comm_s", r.result.exposed_comm_s},
                          {"slowdown_vs_best", best > 0 ? r.result.total_s / best : 1.0},
                          {"transfers", r.result.transfers}};
      if (!r.result.busiest_links.empty())
        j["busiest_link"] = {{"link", r.result.busiest_links[0].name},
                             {"busy_fraction", r.result.busiest_links[0].busy_fraction}};
      list.push_back(j);
    }
    out["strategies"] = list;
    a.json.emit(out, a.force);
    if (a.json.to_stdout()) return;
  }
  out("simulated {} on {} (GPUs {})\n", workload::describe(op), prof.name,
             fmt::join(gpus, ","));
  out("  {:<18} {:>12} {:>13} {:>8}  {}\n", "strategy", "total", "exposed comm", "vs best",
             "busiest link (busy %)");
  for (const Row& r : rows) {
    std::string link = "-";
    if (!r.result.busiest_links.empty())
      link = fmt::format("{} ({:.0f})", r.result.busiest_links[0].name,
                         100.0 * r.result.busiest_links[0].busy_fraction);
    out("  {:<18} {:>12} {:>13} {:>8}  {}\n", schedule::to_string(r.strategy),
               format_seconds(r.result.total_s), format_seconds(r.result.exposed_comm_s),
               format_ratio(best > 0 ? r.result.total_s / best : 1.0, 2), link);
  }
}

}  // namespace

void add_simulate_verb(CLI::App& app) {
  auto args = std::make_shared<SimulateArgs>();
  auto* sub = app.add_subcommand(
      "simulate", "Simulate an operator's schedule on a machine model (SimGrid) and report time, "
                  "busy resources, exposed communication and the busiest links");
  sub->add_option("--profile", args->profile, "Preset name or profile JSON file")
      ->capture_default_str();
  sub->add_option("--op", args->op, "Operator kind: ag_gemm, gemm_rs, gemm_ar")->capture_default_str();
  add_integer_option(sub, "--m", args->m, "Tokens M (global)", 1)->required();
  add_integer_option(sub, "--n", args->n, "Output features N (global)", 1)->required();
  add_integer_option(sub, "--k", args->k, "Input features K (global)", 1)->required();
  sub->add_option("--tp", args->tp, "TP degree (default: every GPU, or the size of --gpus)")
      ->transform(positive_tp());
  sub->add_option("--gpus", args->gpus, "GPU ordinals of the TP group, e.g. 0,1,2,3")
      ->check(nonempty_gpus());
  sub->add_option("--strategy", args->strategy,
                  "sequential, decompose:D, fuse:all2all, fuse:ring, fuse:double-ring, or all")
      ->capture_default_str();
  sub->add_option("--dtype", args->dtype, "Element type")->capture_default_str();
  add_output_option(sub, "--trace", args->trace,
                    "Write a Chrome/Perfetto trace (JSON) to this file ('-' for stdout)");
  add_integer_option(sub, "--links", args->busiest, "How many busiest link directions to report", 0)
      ->capture_default_str();
  sub->add_flag("--force", args->force, "Overwrite the trace file (and --json-out) if it exists");
  args->json.add_to(sub, "the simulated times");
  sub->callback([args] {
    if (!sim::compiled_in())
      throw UsageError("this build has no simulator (configure with -DCOMPASS_WITH_SIM=ON)");
    run_simulate(*args);
  });
}

}  // namespace compass::cli
