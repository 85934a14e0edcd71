#include "compass/cli/spread.hpp"

#include <cstdio>
#include <cstdlib>

#include <fmt/format.h>

#include "compass/study/run_operator.hpp"

namespace compass::cli {

namespace launch = backends::launch;

namespace {

// The longest rank 0 waits for the others' results: they are simulating, and a rank that fails
// ends the job itself, so this only bounds a rank that hangs.
constexpr double kGatherBound_s = 7 * 24 * 3600.0;

}  // namespace

std::function<void()> on_mpi_start_timeout(double seconds, std::string hint) {
  return [seconds, hint = std::move(hint)] {
    fmt::print(stderr,
               "compass: error: MPI did not start within {:.3g} s{}: a process of the job never "
               "started\n",
               seconds, hint);
    std::fflush(stderr);
    std::_Exit(2);
  };
}

launch::RunDescription describe_command(const CLI::App& sub) {
  launch::RunDescription d;
  for (const CLI::Option* o : sub.get_options()) {
    const std::string name = o->get_name();
    if (name == "--json" || name == "--json-out" || name == "--force" || name == "--help") continue;
    d.emplace_back(name, fmt::format("{}", fmt::join(o->results(), ",")));
  }
  return d;
}

std::unique_ptr<Spread> Spread::join(const CLI::App& sub, double start_timeout_s) {
  std::unique_ptr<Spread> s(new Spread());
  if (!launch::started_by_mpi_launcher()) return s;
  launch::SessionOptions so;
  so.kind = launch::LaunchKind::mpi;
  so.start_timeout_s = start_timeout_s;
  so.on_start_timeout = on_mpi_start_timeout(start_timeout_s);
  Result<std::unique_ptr<launch::Session>> session = launch::Session::start(so);
  if (!session.ok()) throw UsageError(session.error().message);
  s->session_ = std::move(session).value();
  s->share_ = study::Share{s->session_->rank(), s->session_->size()};
  s->run([&] {
    const study::ProcessRun p = unwrap(study::connect(*s->session_));
    s->collectives_ = p.transport;
    unwrap(s->session_->agree(describe_command(sub)));
  });
  return s;
}

Spread::~Spread() = default;

ProgressFlags Spread::progress(const ProgressFlags& given) const {
  if (root()) return given;
  ProgressFlags none;
  none.mode = "none";
  return none;
}

std::vector<std::string> Spread::gather(const std::string& mine) {
  if (!session_) return {mine};
  std::vector<std::string> all;
  run([&] { all = unwrap(collectives_->all_gather(mine, kGatherBound_s)); });
  if (!root()) all.clear();
  return all;
}

void end_rank_after_failure(launch::Session* session, const std::string& message) {
  fmt::print(stderr, "compass: error: [rank {} of {}] {}\n", session ? session->rank() : 0,
             session ? session->size() : 1, message);
  std::fflush(stderr);
  if (session) session->leave_after_failure();
  throw ExitCode{2};
}

void Spread::fail(const std::string& message) { end_rank_after_failure(session_.get(), message); }

}  // namespace compass::cli
