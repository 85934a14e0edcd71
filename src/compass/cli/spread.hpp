#pragma once
// A verb's work shared among the processes of an MPI job (`mpirun -np N compass sweep --sim`,
// `mpirun -np N compass search ... --refine sim`): every rank checks that all were given the same
// command line, does its share (study::Share: item i on rank i mod N) and sends the results to
// rank 0, which alone prints and writes. A rank that fails prints its error and ends the whole
// job within the stop bound. Started without an MPI launcher, the process does everything.

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "compass/backends/launch/session.hpp"
#include "compass/cli/common.hpp"
#include "compass/study/share.hpp"

namespace compass::cli {

/// What a process does when MPI_Init has not returned within `seconds` (SessionOptions::
/// on_start_timeout): prints "compass: error: MPI did not start within S s<hint>: a process of
/// the job never started" and ends at once with exit code 2. `hint` names the flag that set the
/// bound, e.g. " (--launch-timeout)".
std::function<void()> on_mpi_start_timeout(double seconds, std::string hint = "");

/// Ends this process of a multi-process job after a failure: prints "compass: error: [rank r of
/// n] <message>" (rank 0 of 1 without a session), lets the others know within the stop bound
/// (Session::leave_after_failure) and throws ExitCode{2}.
[[noreturn]] void end_rank_after_failure(backends::launch::Session* session,
                                         const std::string& message);

/// What a verb's command line asks for, as the ranks compare it: every option with its values,
/// except those that only name outputs (--json, --json-out, --force, --help).
backends::launch::RunDescription describe_command(const CLI::App& sub);

class Spread {
 public:
  /// Under an MPI launcher (mpirun, srun): starts this process's part of the job (MPI_Init
  /// bounded by `start_timeout_s`) and checks that every rank was given the same command line;
  /// else the single process. Errors are printed and end the job (ExitCode 2).
  static std::unique_ptr<Spread> join(const CLI::App& sub, double start_timeout_s = 60);
  ~Spread();
  Spread(const Spread&) = delete;
  Spread& operator=(const Spread&) = delete;

  study::Share share() const { return share_; }
  /// Rank 0, or the single process: the one that prints and writes.
  bool root() const { return share_.rank == 0; }
  /// Progress flags for this process: rank 0's as given, none on the others.
  ProgressFlags progress(const ProgressFlags& given) const;

  /// On rank 0 every rank's bytes (index = rank), elsewhere empty. A rank that does not arrive
  /// because it failed has ended the job; this waits for slow ones as long as they work.
  std::vector<std::string> gather(const std::string& mine);

  /// Testing (a verb's hidden --fault-rank): under mpirun, rank `rank` fails here.
  void inject_fault(int rank) const {
    if (session_ && rank == share_.rank)
      throw UsageError("injected failure (--fault-rank)");
  }

  /// Runs `work`. A UsageError it throws is printed naming this rank and ends every process of
  /// the job (ExitCode 2); with one process it propagates as it is.
  template <class F>
  void run(F&& work) {
    if (!session_) return work();
    try {
      work();
    } catch (const UsageError& e) {
      fail(e.what());
    }
  }

 private:
  Spread() = default;
  [[noreturn]] void fail(const std::string& message);

  study::Share share_;
  std::unique_ptr<backends::launch::Session> session_;
  std::shared_ptr<backends::launch::Collectives> collectives_;
};

}  // namespace compass::cli
