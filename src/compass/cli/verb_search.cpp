// compass search --model M --cluster C --gpus N --global-batch B --seq S [--tp/--pp/--vpp/--mbs/
// --sp/--recompute to fix a dimension] [--top K] [--json]: the training layouts of a model on a
// cluster that fit in memory, ranked by iteration time, with the breakdown under the three TP
// overlap settings and the winner as Megatron-LM arguments. With every dimension fixed it
// prices one layout. --refine sim simulates the top layouts on SimGrid and re-ranks them.

#include <fmt/format.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "compass/cli/common.hpp"
#include "compass/cli/spread.hpp"
#include "compass/core/units.hpp"
#include "compass/job/search.hpp"
#include "compass/plan/megatron_flags.hpp"
#include "compass/plan/te_export.hpp"
#include "compass/study/job_accuracy.hpp"

namespace compass::cli {

namespace {

constexpr plan::Config kConfigs[] = {plan::Config::megatron, plan::Config::te_default,
                                     plan::Config::compass};

struct SearchOptions {
  std::string model = "llama2-13b";
  int fault_rank = -1;  // testing: under mpirun this rank fails
  std::string cluster = "dgx-h100";
  std::int64_t gpus = 8;
  int global_batch = 8;
  std::int64_t seq = 4096;
  int top = 3;
  std::optional<int> tp, cp, pp, vpp, mbs;
  int max_cp = 1;
  std::string sp = "any";
  std::string recompute = "any";
  bool no_dist_opt = false;
  bool no_dp_overlap = false;
  bool fp8 = false;
  bool ignore_memory = false;
  int max_vpp = 4;
  int threads = 0;  // planning workers (0: one per hardware thread)
  std::string te_config = "tp_comm_overlap.yaml";
  std::string refine;
  std::string sim_scope = "replica";
  std::string sim_tp = "priced";
  std::string sim_under = "launch";
  bool force = false;
  JsonOutput json;
};

job::SearchRequest request_from(const SearchOptions& o) {
  job::SearchRequest r;
  r.gpus = o.gpus;
  r.global_batch = o.global_batch;
  r.seq = o.seq;
  r.tp = o.tp;
  r.cp = o.cp;
  r.max_cp = o.max_cp;
  r.pp = o.pp;
  r.vpp = o.vpp;
  r.micro_batch = o.mbs;
  if (o.sp == "on")
    r.sequence_parallel = true;
  else if (o.sp == "off")
    r.sequence_parallel = false;
  else if (o.sp != "any")
    throw UsageError(fmt::format("--sp: expected on, off or any, got '{}'", o.sp));
  if (o.recompute != "any") {
    const auto rc = job::parse_recompute(o.recompute);
    if (!rc)
      throw UsageError(
          fmt::format("--recompute: expected none, selective, full or any, got '{}'", o.recompute));
    r.recompute = *rc;
  }
  r.distributed_optimizer = !o.no_dist_opt;
  r.dp_overlap = !o.no_dp_overlap;
  r.fp8 = o.fp8;
  r.max_vpp = o.max_vpp;
  r.top = o.top;
  r.ignore_memory = o.ignore_memory;
  r.threads = o.threads;
  return r;
}

nlohmann::ordered_json step_json(const job::StepResult& s) {
  const job::StageMemory& peak = s.memory.stages[s.memory.peak_stage];
  return {{"iteration_s", s.iteration_s},
          {"tokens_per_s_per_gpu", s.tokens_per_s_per_gpu},
          {"model_tflops_per_gpu", s.model_tflops_per_gpu},
          {"hardware_tflops_per_gpu", s.hardware_tflops_per_gpu},
          {"mfu", s.mfu},
          {"compute_s", s.breakdown.compute_s},
          {"tp_exposed_s", s.breakdown.tp_exposed_s},
          {"cp_exposed_s", s.breakdown.cp_exposed_s},
          {"bubble_s", s.breakdown.bubble_s},
          {"dp_exposed_s", s.breakdown.dp_exposed_s},
          {"optimizer_s", s.breakdown.optimizer_s},
          {"critical_stage", s.critical_stage},
          {"memory_peak_bytes", s.memory.peak_bytes},
          {"memory_peak_stage", s.memory.peak_stage},
          {"memory_fits", s.memory.fits()},
          {"memory",
           {{"weights_bytes", peak.weights_bytes},
            {"grads_bytes", peak.grads_bytes},
            {"optimizer_bytes", peak.optimizer_bytes},
            {"activations_bytes", peak.activations_bytes},
            {"comm_buffers_bytes", peak.comm_buffers_bytes},
            {"allowance_bytes", peak.allowance_bytes}}}};
}

nlohmann::ordered_json layout_json(const job::Layout& l) {
  return {{"tp", l.tp},
          {"cp", l.cp},
          {"pp", l.pp},
          {"vpp", l.vpp},
          {"dp", l.dp},
          {"micro_batch", l.micro_batch},
          {"global_batch", l.global_batch},
          {"seq", l.seq},
          {"sequence_parallel", l.sequence_parallel},
          {"recompute", std::string(job::to_string(l.recompute))},
          {"distributed_optimizer", l.distributed_optimizer},
          {"overlap_grad_reduce", l.overlap_grad_reduce},
          {"overlap_param_gather", l.overlap_param_gather},
          {"fp8", l.fp8}};
}

// What the launch of a layout runs for its TP communication.
const char* launch_overlap(const job::Candidate& c) {
  return c.launch_runs_te() ? "te-export" : "megatron";
}

nlohmann::ordered_json candidate_json(const job::Candidate& c) {
  nlohmann::ordered_json j;
  j["layout"] = layout_json(c.layout);
  j["describe"] = job::describe(c.layout);
  for (plan::Config cfg : kConfigs) j[std::string(plan::to_string(cfg))] = step_json(c.under(cfg));
  j["launch"] = step_json(c.launch);
  j["launch_overlap"] = launch_overlap(c);
  if (!c.launch_runs_te()) j["launch_without_te"] = c.launch_without_te;
  return j;
}

// The `compass export te` command that writes the TP overlap settings of `best`, with the
// cluster and model as given, so that it runs where the search did.
std::vector<std::string> te_export_command(const job::SearchRequest& r, const job::Layout& best,
                                           const SearchOptions& o) {
  std::vector<std::string> cmd = {"compass",
                                  "export",
                                  "te",
                                  "--cluster",
                                  o.cluster,
                                  "--model",
                                  o.model,
                                  "--tp",
                                  std::to_string(best.tp),
                                  "--seq",
                                  std::to_string(r.seq),
                                  "--mbs",
                                  std::to_string(best.micro_batch)};
  if (best.cp > 1) cmd.insert(cmd.end(), {"--cp", std::to_string(best.cp)});
  if (best.fp8) cmd.push_back("--fp8");
  cmd.insert(cmd.end(), {"--out", o.te_config});
  return cmd;
}

void print_human(const job::Searcher& s, const job::SearchRequest& r, const job::SearchResult& res,
                 const SearchOptions& o) {
  const job::Cluster& c = s.cluster();
  fmt::print("search    {} on {} GPUs of {} ({} per node), global batch {}, sequence {}\n",
             s.model().name, r.gpus, c.name, c.gpus_per_node(), r.global_batch, r.seq);
  fmt::print("layouts   {} valid, {} fit in {:.1f} GiB per GPU, {} distinct layer plans\n",
             res.enumerated, res.fitting, c.node.gpu_device(0).memory_bytes / kGiB,
             s.planned_layers());
  // Long sequences are where context parallelism pays; it is tried only when asked.
  constexpr std::int64_t kLongSequence = 8192;
  if (!r.cp && r.max_cp == 1 && r.seq >= kLongSequence)
    fmt::print("note      context parallelism not tried (--max-cp 8 tries CP 2, 4 and 8)\n");
  fmt::print("\n");
  // The CP column only where a listed layout has context parallelism.
  const bool cp_column = std::any_of(res.top.begin(), res.top.end(),
                                     [](const job::Candidate& k) { return k.layout.cp > 1; });
  auto breakdown = [cp_column](std::string_view compute, std::string_view tp, std::string_view cp,
                               std::string_view bubble, std::string_view dp,
                               std::string_view optim) {
    return cp_column ? fmt::format("{:>9} {:>9} {:>9} {:>9} {:>9} {:>9}", compute, tp, cp, bubble,
                                   dp, optim)
                     : fmt::format("{:>9} {:>9} {:>9} {:>9} {:>9}", compute, tp, bubble, dp, optim);
  };
  fmt::print("{:<4} {:<40} {:<10} {:>10} {:>9} {:>6} {:>7} | {} | {:>8}\n", "rank", "layout",
             "overlap", "iteration", "tok/s/GPU", "MFU", "TFLOP/s",
             breakdown("compute", "TP exp", "CP exp", "bubble", "DP exp", "optim"), "mem GiB");
  auto row = [&breakdown](const std::string& rank, const std::string& layout,
                          std::string_view overlap, const job::StepResult& st) {
    const job::StepBreakdown& b = st.breakdown;
    fmt::print("{:<4} {:<40} {:<10} {:>10} {:>9.0f} {:>5.1f}% {:>7.1f} | {} | {:>7.1f}{}\n", rank,
               layout, overlap, format_seconds(st.iteration_s), st.tokens_per_s_per_gpu,
               st.mfu * 100, st.model_tflops_per_gpu,
               breakdown(format_seconds(b.compute_s), format_seconds(b.tp_exposed_s),
                         format_seconds(b.cp_exposed_s), format_seconds(b.bubble_s),
                         format_seconds(b.dp_exposed_s), format_seconds(b.optimizer_s)),
               st.memory.peak_bytes / kGiB, st.memory.fits() ? "" : " (over)");
  };
  int rank = 0;
  for (const job::Candidate& k : res.top) {
    ++rank;
    for (plan::Config cfg : kConfigs)
      row(cfg == plan::Config::megatron ? std::to_string(rank) : "",
          cfg == plan::Config::megatron ? job::describe(k.layout) : "", plan::to_string(cfg),
          k.under(cfg));
    row("", "", "launch", k.launch);
  }
  fmt::print(
      "\nranked by launch: the printed Megatron-LM launch, with the TP overlap settings Compass "
      "exports where TransformerEngine can run them (compass: Compass's own choices, which TE "
      "cannot always run)\n");
  fmt::print("\nbest layout under each TP overlap setting, and the best launch\n");
  for (plan::Config cfg : kConfigs) {
    const job::Candidate& b = cfg == plan::Config::megatron     ? res.best_megatron
                              : cfg == plan::Config::te_default ? res.best_te
                                                                : res.best_compass;
    fmt::print("  {:<10} {:<40} {}\n", plan::to_string(cfg), job::describe(b.layout),
               format_seconds(b.under(cfg).iteration_s));
  }
  const job::Candidate& win = res.best_launch;
  const double mine = win.launch.iteration_s;
  fmt::print("  {:<10} {:<40} {}\n", "launch", job::describe(win.layout), format_seconds(mine));
  if (res.compass_changes_winner())
    fmt::print("Compass's TP overlap changes the winning layout.\n");
  else
    fmt::print("The best launch is the layout Megatron-LM's and TE's defaults pick.\n");
  auto against = [mine](double other) {
    return mine <= other ? fmt::format("{:.1f}% shorter than", 100 * (1 - mine / other))
                         : fmt::format("{:.1f}% longer than", 100 * (mine / other - 1));
  };
  fmt::print("The best launch's iteration is {} Megatron-LM's best and {} TE's defaults' best.\n",
             against(res.best_megatron.megatron.iteration_s), against(res.best_te.te.iteration_s));
  if (!(res.best_compass.layout == win.layout))
    fmt::print(
        "Compass's own choices would be fastest on {} ({}), but TransformerEngine cannot run "
        "all of them: its launch there takes {}.\n",
        job::describe(res.best_compass.layout),
        format_seconds(res.best_compass.compass.iteration_s),
        format_seconds(res.best_compass.launch.iteration_s));
  const job::Layout& best = win.layout;
  const std::vector<std::string> args =
      job::megatron_args(best, s.model().layers, plan::Config::compass);
  const bool te = win.launch_runs_te();
  fmt::print("\nmegatron-lm arguments (the best launch)\n  {}{}\n", plan::shell_line(args),
             te ? " \"${MEGATRON_TP_ARGS[@]}\"" : "");
  if (const std::string req = plan::megatron_core_requirement(args); !req.empty())
    fmt::print("requires: {}\n", req);
  if (te)
    fmt::print(
        "TP overlap settings: this writes {} and a launch script beside it (source it first: "
        "MEGATRON_TP_ARGS and the environment)\n  {}\n",
        plan::shell_word(o.te_config), plan::shell_line(te_export_command(r, best, o)));
  if (best.tp < 2) return;
  if (!te) fmt::print("no TP overlap in this launch: {}\n", win.launch_without_te);
  // What the launch is expected to take: TE cannot run every strategy Compass chooses, and
  // without TE's overlap Megatron-LM runs the TP communication after its GEMMs.
  fmt::print(
      "expected with this launch ({}): iteration {}, {:.0f} tok/s/GPU, MFU {:.1f}% "
      "(Compass's own choices: {})\n",
      te ? "TE running the exported settings" : "Megatron-LM's sequential TP", format_seconds(mine),
      win.launch.tokens_per_s_per_gpu, win.launch.mfu * 100,
      format_seconds(win.compass.iteration_s));
}

nlohmann::ordered_json refine_json(const study::RefineReport& rep,
                                   const study::JobSimSettings& settings) {
  nlohmann::ordered_json j;
  j["under"] = std::string(job::to_string(rep.under));
  j["scope"] = std::string(backends::sim::to_string(settings.scope));
  j["tp_ops"] = std::string(study::to_string(settings.tp_ops));
  j["mape"] = rep.mape;
  j["max_abs_error"] = rep.max_abs_error;
  j["model_best_rank"] = rep.model_best + 1;
  j["regret"] = rep.regret;
  j["rows"] = nlohmann::ordered_json::array();
  for (const study::SimulatedLayout& row : rep.rows)
    j["rows"].push_back({{"describe", job::describe(row.candidate.layout)},
                         {"model_s", row.model_s},
                         {"sim_s", row.sim_s},
                         {"error", row.error},
                         {"flows", row.flows}});
  return j;
}

void print_refine(const study::RefineReport& rep, const study::JobSimSettings& settings) {
  const std::string under = rep.under == job::Pricing::launch
                                ? std::string("each layout as its launch runs")
                                : fmt::format("under {}'s overlap", job::to_string(rep.under));
  fmt::print("\nsimulated on SimGrid ({}; TP operators {}; {}), by simulated time\n",
             settings.scope == backends::sim::JobSimScope::cluster
                 ? "every GPU of the cluster, DP collectives with their real ring neighbours"
                 : "one pipeline, DP collectives on the network",
             settings.tp_ops == study::TpOpTimes::simulated ? "simulated alone on the node"
                                                            : "as the step model prices them",
             under);
  fmt::print("{:<4} {:<40} {:>10} {:>10} {:>8} {:>10}\n", "rank", "layout", "model", "simulated",
             "error", "model rank");
  // The model's rank of each row: its position by model time.
  std::vector<int> by_model(rep.rows.size());
  for (std::size_t i = 0; i < rep.rows.size(); ++i) {
    int better = 0;
    for (const study::SimulatedLayout& other : rep.rows)
      if (other.model_s < rep.rows[i].model_s) ++better;
    by_model[i] = better + 1;
  }
  for (std::size_t i = 0; i < rep.rows.size(); ++i) {
    const study::SimulatedLayout& row = rep.rows[i];
    fmt::print("{:<4} {:<40} {:>10} {:>10} {:>+7.2f}% {:>10}\n", i + 1,
               job::describe(row.candidate.layout), format_seconds(row.model_s),
               format_seconds(row.sim_s), 100 * row.error, by_model[i]);
  }
  fmt::print("model error over {} layouts: MAPE {:.2f}%, largest {:.2f}%\n", rep.rows.size(),
             100 * rep.mape, 100 * rep.max_abs_error);
  if (rep.model_best == 0)
    fmt::print("The model's best layout is also the simulated best.\n");
  else
    fmt::print(
        "The model's best layout ranks {} in simulation, {:.2f}% slower than the simulated "
        "best.\n",
        rep.model_best + 1, 100 * rep.regret);
}

// Under mpirun every rank searches (it is quick) and simulates its share of the top layouts;
// rank 0 ranks them all and alone prints and writes.
void search(const SearchOptions& o, Spread& spread) {
  if (spread.root()) o.json.check_writable(o.force);
  if (!o.refine.empty() && o.refine != "sim")
    throw UsageError(fmt::format("--refine: expected sim, got '{}'", o.refine));
  if (o.sim_scope != "replica" && o.sim_scope != "cluster")
    throw UsageError(
        fmt::format("--sim-scope: expected replica or cluster, got '{}'", o.sim_scope));
  const backends::sim::JobSimScope scope = o.sim_scope == "cluster"
                                               ? backends::sim::JobSimScope::cluster
                                               : backends::sim::JobSimScope::replica;
  if (scope == backends::sim::JobSimScope::cluster && o.refine != "sim")
    throw UsageError("--sim-scope cluster needs --refine sim");
  if (scope == backends::sim::JobSimScope::cluster && o.gpus > backends::sim::kMaxClusterScopeGpus)
    throw UsageError(
        fmt::format("--sim-scope cluster simulates every GPU, at most {}; --gpus {} "
                    "takes --sim-scope replica",
                    backends::sim::kMaxClusterScopeGpus, o.gpus));
  if (o.sim_tp != "priced" && o.sim_tp != "simulated")
    throw UsageError(fmt::format("--sim-tp: expected priced or simulated, got '{}'", o.sim_tp));
  study::JobSimSettings settings;
  settings.scope = scope;
  settings.tp_ops = o.sim_tp == "simulated" ? study::TpOpTimes::simulated : study::TpOpTimes::priced;
  if (settings.tp_ops == study::TpOpTimes::simulated && o.refine != "sim")
    throw UsageError("--sim-tp simulated needs --refine sim");
  const std::optional<job::Pricing> under = job::parse_pricing(o.sim_under);
  if (!under)
    throw UsageError(fmt::format(
        "--sim-under: expected launch, compass, te-default or megatron, got '{}'", o.sim_under));
  if (*under != job::Pricing::launch && o.refine != "sim")
    throw UsageError("--sim-under needs --refine sim");
  if (Status st = study::check_job_sim(*under, settings); !st.ok())
    throw UsageError(fmt::format("--sim-tp simulated with --sim-under {}: {} (--sim-under)",
                                 o.sim_under, st.error().message));
  const job::SearchRequest r = request_from(o);
  workload::ModelConfig model = unwrap(workload::resolve_model(o.model));
  job::Cluster cluster = unwrap(job::resolve_cluster(o.cluster));
  job::Searcher s(std::move(cluster), std::move(model));
  const job::SearchResult res = unwrap(s.search(r));
  std::optional<study::RefineReport> refined;
  if (o.refine == "sim") {
    const study::Share share = spread.share();
    const std::vector<study::LayoutSimulation> mine = unwrap(
        study::simulate_layouts(s.cluster(), s.model(), res.top, *under, {}, share, settings));
    const std::vector<std::string> all = spread.gather(study::pack_share(mine, share));
    if (!spread.root()) return;
    refined = unwrap(study::rank_by_simulation(
        res.top, unwrap(study::unpack_shares<study::LayoutSimulation>(all, res.top.size())),
        *under));
  }
  if (!spread.root()) return;
  if (o.json.any()) {
    nlohmann::ordered_json j;
    j["model"] = s.model().name;
    j["cluster"] = s.cluster().name;
    j["gpus"] = r.gpus;
    j["global_batch"] = r.global_batch;
    j["seq"] = r.seq;
    j["enumerated"] = res.enumerated;
    j["fitting"] = res.fitting;
    j["top"] = nlohmann::ordered_json::array();
    for (const job::Candidate& k : res.top) j["top"].push_back(candidate_json(k));
    j["best"] = {{"megatron", candidate_json(res.best_megatron)},
                 {"te-default", candidate_json(res.best_te)},
                 {"compass", candidate_json(res.best_compass)},
                 {"launch", candidate_json(res.best_launch)}};
    j["compass_changes_winner"] = res.compass_changes_winner();
    const job::Candidate& win = res.best_launch;
    const job::Layout& best = win.layout;
    const std::vector<std::string> args =
        job::megatron_args(best, s.model().layers, plan::Config::compass);
    j["megatron_args"] = args;
    j["megatron_core_min"] = fmt::format("0.{}", plan::megatron_core_needed(args).minor);
    if (win.launch_runs_te()) j["te_export_command"] = te_export_command(r, best, o);
    if (best.tp > 1) {
      if (!win.launch_runs_te()) j["te_export_error"] = win.launch_without_te;
      j["launch_overlap"] = launch_overlap(win);
      j["launch_step"] = step_json(win.launch);
    }
    if (refined) j["refine"] = refine_json(*refined, settings);
    o.json.emit(j, o.force);
  }
  if (!o.json.to_stdout()) {
    print_human(s, r, res, o);
    if (refined) print_refine(*refined, settings);
  }
}

void run(const SearchOptions& o, const CLI::App& sub) {
  const std::unique_ptr<Spread> spread = Spread::join(sub);
  spread->run([&] {
    spread->inject_fault(o.fault_rank);
    search(o, *spread);
  });
}

}  // namespace

void add_search_verb(CLI::App& app) {
  auto o = std::make_shared<SearchOptions>();
  auto* sub = app.add_subcommand(
      "search",
      "Search the training layouts of a model on a cluster (TP, CP, PP, DP, micro-batch, "
      "recomputation) and rank them under three TP overlap settings");
  sub->add_option("--model", o->model, "Built-in model name or model JSON file")
      ->capture_default_str();
  sub->add_option("--cluster", o->cluster,
                  "Built-in cluster (dgx-a100, dgx-h100, a6000x8-2nic, gb200-nvl72), cluster "
                  "JSON file, or machine profile (one node)")
      ->capture_default_str();
  add_integer_option(sub, "--gpus", o->gpus, "GPUs in the job", 1)->capture_default_str();
  add_integer_option(sub, "--global-batch", o->global_batch, "Sequences per iteration", 1)
      ->capture_default_str();
  add_integer_option(sub, "--seq", o->seq, "Sequence length", 1)->capture_default_str();
  add_integer_option(sub, "--top", o->top, "Layouts to show", 1, 1000)->capture_default_str();
  sub->add_option("--tp", o->tp, "Fix the tensor-parallel size")
      ->transform(integer_in(1, 1 << 20));
  sub->add_option("--cp", o->cp,
                  "Fix the context-parallel size (ranks sharing each sequence; default: 1 unless "
                  "--max-cp)")
      ->transform(integer_in(1, 1 << 20));
  sub->add_option("--pp", o->pp, "Fix the pipeline-parallel size")
      ->transform(integer_in(1, 1 << 20));
  sub->add_option("--vpp", o->vpp, "Fix the model chunks per pipeline stage (1: plain 1F1B)")
      ->transform(integer_in(1, 1 << 20));
  sub->add_option("--mbs", o->mbs, "Fix the micro-batch size")
      ->transform(integer_in(1, 1 << 20));
  sub->add_option("--sp", o->sp, "Sequence parallel: on, off or any")->capture_default_str();
  sub->add_option("--recompute", o->recompute, "none, selective, full or any")
      ->capture_default_str();
  add_integer_option(sub, "--max-vpp", o->max_vpp,
                     "Largest number of model chunks per stage to try", 1, 64)
      ->capture_default_str();
  add_integer_option(sub, "--max-cp", o->max_cp,
                     "Largest context-parallel size to try (powers of two; 1: none)", 1, 1 << 20)
      ->capture_default_str();
  sub->add_flag("--no-dist-opt", o->no_dist_opt, "Without the distributed optimizer");
  sub->add_flag("--no-dp-overlap", o->no_dp_overlap,
                "Without --overlap-grad-reduce / --overlap-param-gather");
  sub->add_flag("--fp8", o->fp8, "FP8 GEMMs (GPUs with an FP8 peak)");
  sub->add_flag("--ignore-memory", o->ignore_memory,
                "Keep layouts that do not fit in GPU memory (marked 'over')");
  add_integer_option(sub, "--threads", o->threads,
                     "Threads planning the layer shapes and pricing the layouts (0: one per "
                     "hardware thread; the result does not depend on it)",
                     0, kMaxThreads)
      ->capture_default_str();
  sub->add_option("--te-config", o->te_config,
                  "The TE overlap file the printed 'compass export te' command writes")
      ->capture_default_str();
  sub->add_option("--refine", o->refine,
                  "sim: simulate the --top layouts on SimGrid (one training iteration each) and "
                  "re-rank them by simulated time");
  sub->add_option("--sim-tp", o->sim_tp,
                  "With --refine sim: priced (the TP operators take the step model's times) or "
                  "simulated (each distinct TP operator's schedule simulated on the node first)")
      ->capture_default_str();
  sub->add_option("--sim-under", o->sim_under,
                  "With --refine sim: what each layout runs in the simulation: launch (the "
                  "printed launch, as the ranking prices it), compass (Compass's own choices), "
                  "te-default or megatron")
      ->capture_default_str();
  sub->add_option("--sim-scope", o->sim_scope,
                  fmt::format("With --refine sim: replica (one pipeline; the other DP replicas' "
                              "traffic as each GPU's share of the NICs) or cluster (every GPU, up "
                              "to {})",
                              backends::sim::kMaxClusterScopeGpus))
      ->capture_default_str();
  add_force_flag(sub, o->force, "--json-out");
  o->json.add_to(sub, "the search result");
  add_integer_option(sub, "--fault-rank", o->fault_rank,
                     "testing: under mpirun this rank fails before its share of the work", -1)
      ->group("");
  sub->callback([o, sub] { run(*o, *sub); });
}

}  // namespace compass::cli
