#include "compass/study/run_operator.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <memory>

#include "compass/backends/cpu/backend.hpp"
#include "compass/backends/cpu/mpi_transport.hpp"
#include "compass/backends/cpu/paced_links.hpp"
#include "compass/backends/cpu/socket_transport.hpp"
#include "compass/backends/cpu/transport_group.hpp"
#include "compass/backends/cuda/process_run.hpp"
#include "compass/model/odp.hpp"

namespace compass::study {

namespace {

namespace cpu = backends::cpu;
namespace cuda = backends::cuda;
namespace launch = backends::launch;

// An error of one strategy's run, as the report names it.
Error strategy_error(const schedule::Schedule& s, const std::string& message) {
  return Error{fmt::format("strategy {}: {}", schedule::to_string(s.strategy), message)};
}

// What the chosen backend needs from the schedule generator (cuda: fused GEMM groups for the
// fused kernel; one process per GPU runs every GEMM on its own).
schedule::GenerateOptions generate_options(const RunRequest& r, bool processes) {
  if (r.backend != RunBackend::cuda) return {};
  cuda::RunOptions options;
  options.kernel = r.kernel;
  if (!options.kernel && processes) options.kernel = cuda::KernelMode::chunked;
  return cuda::generate_options(options);
}

cuda::RunOptions cuda_options(const RunRequest& r) {
  cuda::RunOptions options;
  static_cast<backends::RunOptions&>(options) = r.run;
  options.mode = r.cuda_mode;
  options.sync = r.sync;
  options.kernel = r.kernel;
  return options;
}

cuda::ProcessRunOptions cuda_process_options(const RunRequest& r) {
  cuda::ProcessRunOptions options;
  static_cast<backends::RunOptions&>(options) = r.run;
  options.sync = r.sync;
  options.kernel = r.kernel ? r.kernel : cuda::KernelMode::chunked;
  options.wait_timeout_s = r.wait_timeout_s > 0 ? r.wait_timeout_s : r.launch_timeout_s;
  options.fail_task = r.fault_task;
  return options;
}

// Tells every other process of a multi-process run that this one failed with `e`, so that each
// stops with it at its next exchange instead of waiting for this one; returns `e`. The messages
// get launch::kAnnounceBound_s to leave (the rest of the stop bound is the farewell's).
Error announced(cpu::Transport* t, Error e) {
  if (!t) return e;
  for (int r = 0; r < t->size(); ++r)
    if (r != t->rank()) t->post(r, cpu::Message{cpu::MessageKind::abort, -1, t->rank(), e.message});
  t->drain_after_failure(launch::kAnnounceBound_s);
  return e;
}

// Runs one schedule into `run` (and what ran); errors name the strategy.
using Runner = std::function<Status(StrategyRun& run)>;

// After every process has run a schedule: all meet (a failure anywhere shows up here, also in
// a process whose own tasks were all done), then rank 0 combines every rank's numbers.
Status gather_ranks(const RunRequest& r, launch::Session& session, StrategyRun& run) {
  backends::Measurement& m = run.m;
  double slowest = 0;
  for (double t : m.times_s) slowest = std::max(slowest, t);
  // The ranks end close together: the start timeout plus ten of this rank's runs.
  const double bound = r.launch_timeout_s + std::max(r.wait_timeout_s, 10 * slowest);
  const launch::RankNumbers mine{m.times_s, m.check.max_abs_error, m.check.max_ref_abs, m.threads};
  auto all = session.gather_numbers(mine, bound);
  if (!all.ok()) return strategy_error(run.schedule, all.error().message);
  if (!*all) return Status::success();
  const launch::RankNumbers& n = **all;
  m.times_s = n.times_s;
  m.threads = n.threads;
  const backends::CheckResult own = m.check;
  m.check.max_abs_error = m.check.max_ref_abs = 0;
  m.check.add(n.max_abs_error, n.max_ref_abs);
  if (own.checked) m.check.judge(own.tolerance);
  // The location of the largest error is only known where it is.
  if (m.check.max_abs_error != own.max_abs_error) m.check.worst.clear();
  backends::summarise_times(m);
  return Status::success();
}

Result<Runner> cpu_runner(const RunRequest& r, const std::vector<StrategyRun>& runs,
                          launch::Session* session, std::shared_ptr<cpu::Transport> transport) {
  std::int64_t workspace = 0;
  for (const auto& run : runs)
    workspace = std::max(workspace, cpu::Workspace::bytes_needed(run.schedule));
  auto made = cpu::make_inputs(r.op, r.run, workspace);
  if (!made.ok()) return announced(transport.get(), made.error());
  std::shared_ptr<const cpu::Inputs> inputs = std::move(made).value();
  cpu::ExecutorOptions options;
  options.blas_threads_per_rank = r.threads_per_rank;
  options.wait_timeout_s = r.wait_timeout_s;
  options.transport = std::move(transport);
  options.fail_task_id = r.fault_task;
  return Runner([&r, inputs, options, session](StrategyRun& run) mutable -> Status {
    const schedule::Schedule& s = run.schedule;
    if (r.emulated_links) {
      auto engine = cpu::PacedLinkEngine::create(*r.emulated_links, s.gpus, r.link_scale);
      if (!engine.ok()) return Error{fmt::format("--links: {}", engine.error().message)};
      options.transfer_engine = *engine;
    }
    auto prepared = cpu::Prepared::create(s, inputs, options);
    if (prepared.ok() && session && session->rank() == r.fault_prepare_rank)
      prepared = Error{"injected fault while preparing"};
    // A failure outside the executor's run: the other processes learn of it from this one.
    if (!prepared.ok())
      return announced(options.transport.get(), strategy_error(s, prepared.error().message));
    auto m = prepared->run(r.run);
    if (!m.ok()) return strategy_error(s, m.error().message);
    run.m = std::move(m).value();
    if (session) COMPASS_TRY(gather_ranks(r, *session, run));
    return Status::success();
  });
}

Runner cuda_runner(const RunRequest& r, std::string& device) {
  return [options = cuda_options(r), &device](StrategyRun& run) -> Status {
    auto prepared = cuda::Prepared::create(run.schedule, options);
    if (!prepared.ok()) return strategy_error(run.schedule, prepared.error().message);
    auto m = prepared->run(options);
    if (!m.ok()) return strategy_error(run.schedule, m.error().message);
    device = prepared->info().device;
    run.kernel = prepared->info().kernel;
    run.sync = prepared->info().sync;
    run.m = std::move(m).value();
    return Status::success();
  };
}

// Each process runs its rank; a failure is announced to the others before it is returned.
Runner cuda_process_runner(const RunRequest& r, launch::Session& session,
                           std::shared_ptr<cpu::Transport> transport, std::string& device) {
  auto group = std::make_shared<cpu::TransportGroup>(*transport, session.local_rank());
  return [&r, &session, group, transport, &device](StrategyRun& run) -> Status {
    const cuda::ProcessRunOptions options = cuda_process_options(r);
    auto fail = [&](const std::string& message) {
      const Error e = strategy_error(run.schedule, message);
      group->announce_failure(e.message);
      return e;
    };
    auto prepared = cuda::ProcessPrepared::create(run.schedule, options, *group);
    if (!prepared.ok()) return fail(prepared.error().message);
    auto m = prepared->run(options);
    if (!m.ok()) return fail(m.error().message);
    device = prepared->info().device;
    run.kernel = prepared->info().kernel;
    run.sync = prepared->info().sync;
    run.m = std::move(m).value();
    return gather_ranks(r, session, run);
  };
}

}  // namespace

Result<std::vector<schedule::Strategy>> strategies_to_run(const std::string& name,
                                                          const hardware::Profile& profile,
                                                          const workload::OperatorSpec& op,
                                                          const schedule::CommPlan& plan) {
  if (name != "all") {
    COMPASS_ASSIGN(schedule::Strategy st, schedule::parse_strategy(name));
    return std::vector<schedule::Strategy>{st};
  }
  model::Caches caches;
  auto odp = model::optimise_decomposition(profile, op, plan, caches);
  if (!odp.ok())
    return make_error("--strategy all: the decomposition degree: {}", odp.error().message);
  return schedule::all_strategies(odp->d_closed);
}

Result<RunReport> prepare_runs(const RunRequest& r, bool processes) {
  RunReport report;
  COMPASS_ASSIGN(report.plan, schedule::comm_plan_for(r.profile, r.gpus));
  COMPASS_ASSIGN(const std::vector<schedule::Strategy> strategies,
                 strategies_to_run(r.strategy, r.profile, r.op, report.plan));
  const schedule::GenerateOptions options = generate_options(r, processes);
  for (const auto& st : strategies) {
    auto s = schedule::generate_for(r.profile, r.op, st, report.plan, options);
    if (!s.ok()) {
      // Generator errors for decompose already start with "decompose:D: ".
      const std::string label = schedule::to_string(st);
      const std::string& msg = s.error().message;
      return Error{msg.rfind(label, 0) == 0 ? msg : fmt::format("strategy {}: {}", label, msg)};
    }
    report.runs.push_back({std::move(s).value(), {}, {}, {}});
  }
  if (r.backend == RunBackend::cuda && processes) {
    const cuda::ProcessRunOptions po = cuda_process_options(r);
    for (const auto& run : report.runs)
      if (Status st = cuda::check_process_request(run.schedule, po, r.op.tp); !st.ok())
        return strategy_error(run.schedule, st.error().message);
    COMPASS_TRY(cuda::device_available());
  }
  return report;
}

Result<ProcessRun> connect(launch::Session& session) {
  ProcessRun p{&session, nullptr};
  if (session.mpi()) {
    COMPASS_ASSIGN(p.transport, cpu::make_mpi_transport(*session.mpi()));
  } else if (session.store()) {
    COMPASS_ASSIGN(p.transport,
                   cpu::make_socket_transport(*session.store(), session.rank(), session.size(),
                                              session.start_timeout_s()));
  } else {
    return make_error("the session was not started");
  }
  session.attach(p.transport);
  return p;
}

Result<RunReport> run_operator(const RunRequest& r, RunReport report, const ProcessRun* process) {
  launch::Session* session = process ? process->session : nullptr;
  if (session && session->size() != r.op.tp)
    return make_error(
        "--launch {}: {} processes were started but --tp is {} (start one process "
        "per rank)",
        launch::to_string(session->kind()), session->size(), r.op.tp);
  Runner runner;
  if (r.backend == RunBackend::cpu) {
    COMPASS_ASSIGN(runner,
                   cpu_runner(r, report.runs, session, process ? process->transport : nullptr));
  } else if (session) {
    runner = cuda_process_runner(r, *session, process->transport, report.device);
  } else {
    COMPASS_TRY(cuda::device_available());
    runner = cuda_runner(r, report.device);
  }
  for (auto& run : report.runs) COMPASS_TRY(runner(run));
  report.reports = !session || session->rank() == 0;
  return report;
}

bool all_passed(const RunReport& report) {
  return std::all_of(report.runs.begin(), report.runs.end(),
                     [](const StrategyRun& r) { return r.m.check.passed; });
}

nlohmann::json results_json(const RunReport& report, RunBackend backend) {
  nlohmann::json results = nlohmann::json::array();
  for (const StrategyRun& r : report.runs) {
    nlohmann::json e = {{"strategy", schedule::to_string(r.schedule.strategy)},
                        {"tasks", r.schedule.tasks.size()},
                        {"times_s", r.m.times_s},
                        {"median_s", r.m.median_s},
                        {"min_s", r.m.min_s},
                        {"max_s", r.m.max_s}};
    if (backend == RunBackend::cpu) e["threads"] = r.m.threads;
    if (backend == RunBackend::cuda) e.update({{"kernel", r.kernel}, {"sync", r.sync}});
    const backends::CheckResult& c = r.m.check;
    if (c.checked)
      e["check"] = {{"max_abs_error", c.max_abs_error},
                    {"max_rel_error", c.max_rel_error},
                    {"max_ref_abs", c.max_ref_abs},
                    {"tolerance", c.tolerance},
                    {"pass", c.passed}};
    if (c.checked && !c.worst.empty()) e["check"]["worst"] = c.worst;
    results.push_back(std::move(e));
  }
  return results;
}

}  // namespace compass::study
