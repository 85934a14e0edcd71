#pragma once
// One process of a one-process-per-rank run (`--launch mpi` / `--launch env`) from its start to
// its end: the bootstrap (MPI_Init bounded by a timeout, or the TCP store from the variables
// torchrun sets), the check that every rank was asked to run the same thing, the combination of
// the ranks' numbers on rank 0, and the end after a failure, when every process has reported and
// none may wait for a peer that is gone. The transport that moves the run's bytes is built by the
// backend on this session's bootstrap (mpi() or store()) and attached as its Collectives.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "compass/backends/launch/mpi_session.hpp"
#include "compass/backends/launch/tcp_store.hpp"
#include "compass/core/result.hpp"

namespace compass::backends::launch {

/// How the processes were started: by mpirun, or the way torchrun starts them.
enum class LaunchKind { mpi, env };

/// "mpi" / "env".
std::string_view to_string(LaunchKind k);
/// Parses the names above; the error names the bad text.
Result<LaunchKind> parse_launch_kind(std::string_view s);

/// The longest a process that failed stays to tell the others (and hear from them) before it
/// ends; after it an MPI job is aborted, so no process waits for a peer that is gone. Of it, a
/// failure announced outside a run may take kAnnounceBound_s to leave; the farewell the rest.
inline constexpr double kStopBound_s = 1.0;
inline constexpr double kAnnounceBound_s = 0.2;

/// What a session needs from the transport between runs (every rank calls each of them).
class Collectives {
 public:
  virtual ~Collectives() = default;
  /// Every rank arrives or the call fails after timeout_s naming the missing ranks.
  virtual Status barrier(double timeout_s) = 0;
  /// After a failure: tells every other process this one is leaving, and waits up to
  /// timeout_s until all have said so; true when all did.
  virtual bool farewell(double timeout_s) = 0;
  /// Every rank receives every rank's bytes (index = rank); also a barrier.
  virtual Result<std::vector<std::string>> all_gather(const std::string& mine,
                                                      double timeout_s) = 0;
  /// Rank 0 receives every rank's vector (index = rank); other ranks get an empty result.
  virtual Result<std::vector<std::vector<double>>> gather(const std::vector<double>& mine,
                                                          double timeout_s) = 0;
};

/// What a rank was asked to run, as (name, value) pairs in a fixed order (e.g. the command
/// line's flags as given). Ranks agree when every pair is equal.
using RunDescription = std::vector<std::pair<std::string, std::string>>;

/// "name=value" lines of `d`, one per pair (names and values with a newline are escaped).
std::string encode_description(const RunDescription& d);
/// The inverse of encode_description; an error for text it did not make.
Result<RunDescription> decode_description(const std::string& text);
/// FNV-1a 64 of encode_description(d), in hex: what the ranks compare first.
std::string description_hash(const RunDescription& d);
/// Ok when every rank's description (index = rank) equals rank 0's; else the error names the
/// first rank and the first pair that differ ("rank 1 was given --m 128 where rank 0 was given
/// --m 96"), or a pair one of them lacks.
Status compare_descriptions(const std::vector<RunDescription>& ranks);

/// What a rank sends to every other at start-up: description_hash(d), a newline, then
/// encode_description(d).
std::string agreement_message(const RunDescription& d);
/// Every rank's agreement_message (index = rank), as all of them receive them: ok when every
/// hash equals rank 0's, else the first difference (compare_descriptions); an error too for a
/// message that agreement_message did not make. Every rank gets the same answer.
Status check_agreement(const std::vector<std::string>& messages);

/// One rank's numbers of one run, as they travel to rank 0.
struct RankNumbers {
  std::vector<double> times_s;  ///< one per timed iteration
  double max_abs_error = 0;     ///< max |y - ref| over this rank's outputs (0: no check)
  double max_ref_abs = 0;       ///< max |ref| over the same outputs
  int threads = 0;              ///< host threads this rank used
  bool operator==(const RankNumbers&) const = default;
};

/// [times..., max_abs_error, max_ref_abs, threads].
std::vector<double> encode_numbers(const RankNumbers& n);
/// Every rank's numbers combined: per iteration the slowest rank's time, the largest errors and
/// reference magnitude, the threads summed. Errors: no ranks, or a rank whose vector is not
/// `iterations` times plus three numbers (it ran something else).
Result<RankNumbers> combine_numbers(const std::vector<std::vector<double>>& ranks,
                                    std::size_t iterations);

/// The rank this process will have as its launcher says (OMPI_COMM_WORLD_RANK, PMI_RANK,
/// PMIX_RANK or RANK), read before anything starts; -1 when none is set.
int rank_from_launcher_env();
/// Whether an MPI launcher (mpirun, srun) started this process: OMPI_COMM_WORLD_RANK, PMI_RANK
/// or PMIX_RANK is set (RANK alone, which torchrun sets, does not count).
bool started_by_mpi_launcher();

struct SessionOptions {
  LaunchKind kind = LaunchKind::mpi;
  /// Bound on starting: MPI_Init, or connecting to the TCP store and to every peer.
  double start_timeout_s = 60;
  /// Called on a watchdog thread when MPI_Init has not returned within start_timeout_s (a
  /// process of the job never started). MPI_Init cannot be interrupted, so it must end the
  /// process; when empty the wait is unbounded.
  std::function<void()> on_start_timeout;
};

class Session {
 public:
  /// Starts this process's part of the job: MPI_Init under the watchdog, or the TCP store from
  /// RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT. Errors name what is missing.
  static Result<std::unique_ptr<Session>> start(const SessionOptions& options);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  LaunchKind kind() const { return kind_; }
  int rank() const { return rank_; }
  int size() const { return size_; }
  /// The rank among the processes of this machine (a CUDA process picks GPU local_rank % GPUs).
  int local_rank() const { return local_rank_; }
  double start_timeout_s() const { return start_timeout_s_; }
  /// The MPI job (kind mpi), else null.
  MpiSession* mpi() const { return mpi_.get(); }
  /// The TCP store (kind env), else null.
  TcpStore* store() const { return store_.get(); }

  /// The transport built on this session's bootstrap; it is destroyed before the bootstrap.
  void attach(std::shared_ptr<Collectives> c) { collectives_ = std::move(c); }
  bool attached() const { return collectives_ != nullptr; }

  /// Every rank exchanges its description (a hash and the pairs) and compares: ok when all
  /// agree, else every rank gets the same error naming the first difference
  /// (compare_descriptions). Needs attach(); bounded by the start timeout.
  Status agree(const RunDescription& mine);

  /// After each run: every rank meets (a failure anywhere shows up here) within `bound_s`, then
  /// rank 0 gets every rank's numbers combined (combine_numbers); other ranks get nullopt.
  Result<std::optional<RankNumbers>> gather_numbers(const RankNumbers& mine, double bound_s);

  /// After this process has reported a failure: tells the others and waits up to kStopBound_s -
  /// kAnnounceBound_s for them to say the same, drops the transport, and aborts the MPI job when one did not
  /// answer (it might otherwise wait forever). Returns only when the process may end normally.
  void leave_after_failure();

 private:
  Session() = default;
  LaunchKind kind_ = LaunchKind::mpi;
  int rank_ = 0, size_ = 1, local_rank_ = 0;
  double start_timeout_s_ = 60;
  // Declared before the transport: destroyed after it (MPI_Finalize last).
  std::unique_ptr<MpiSession> mpi_;
  std::unique_ptr<TcpStore> store_;
  std::shared_ptr<Collectives> collectives_;
};

}  // namespace compass::backends::launch
