#pragma once
// How the CPU executor reaches ranks that live in other processes. With no transport every
// rank is a thread of this process (the default); with one, this process runs only the tasks of
// transport.rank() and everything that crosses a process boundary goes through it:
//   - a completion another process waits for is a `done` message to it;
//   - a transfer between processes moves its bytes with send_data / expect_data, and is done
//     when the bytes have landed in the destination (the destination process completes it);
//   - a transfer whose owner (the rank whose copy engine runs it) does not hold the source
//     asks the source process to send with a `pull` message;
//   - a failure is an `abort` message to every process.
// The protocol lives in the executor; a transport only moves messages and bytes, so MPI and
// sockets share one executor. docs/cpu-backend.md, "Launch modes", has the details.

#include <cstdint>
#include <string>
#include <vector>

#include "compass/backends/launch/session.hpp"
#include "compass/core/result.hpp"

namespace compass::backends::cpu {

enum class MessageKind : std::int32_t { done = 1, pull = 2, abort = 3 };

/// A control message between processes.
struct Message {
  MessageKind kind = MessageKind::done;
  int task = -1;     ///< done / pull: the task; abort: the failing task or -1
  int from = -1;     ///< the sending rank
  std::string text;  ///< abort: the error
};

/// rows x cols FP32 elements with a row stride of ld elements, in this process's memory.
struct Span {
  float* data = nullptr;
  std::int64_t ld = 0;
  std::int64_t rows = 0;
  std::int64_t cols = 0;
};

/// What a transport hands back while it progresses (always on the thread that calls poll).
class TransportSink {
 public:
  virtual ~TransportSink() = default;
  virtual void on_message(const Message& m) = 0;
  /// The bytes of transfer `task`, announced with expect_data, have landed.
  virtual void on_data(int task) = 0;
};

/// Moves messages and transfer bytes between the processes of one run, one rank per process.
/// post() and send_data() are called from executor threads and only queue; everything else,
/// including the actual communication, happens on the one thread that calls poll() (and,
/// between runs, the collectives), so the transport needs no thread support from MPI. Its
/// collectives between runs (barrier, farewell, all_gather, gather) are the ones a
/// launch::Session needs.
class Transport : public launch::Collectives {
 public:
  virtual ~Transport() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// "mpi" or "sockets", for reports.
  virtual std::string name() const = 0;

  /// Queues a control message to rank `to` (thread-safe).
  virtual void post(int to, const Message& m) = 0;
  /// Queues the bytes of transfer `task` for rank `to` (thread-safe). `src` stays unchanged
  /// until the task is complete everywhere (the schedule orders its writers after the task).
  virtual void send_data(int to, int task, Span src) = 0;
  /// Before a run: the bytes of transfer `task` will come from rank `from` into `dst`.
  virtual Status expect_data(int from, int task, Span dst) = 0;

  /// One round of progress: starts queued sends, completes what finished, delivers arrived
  /// messages and data to `sink`. Returns false when nothing happened (the caller backs off).
  /// An error (a broken connection, an MPI error) ends the run.
  virtual Result<bool> poll(TransportSink& sink) = 0;
  /// True when every queued and started send has completed and every expected transfer has
  /// landed.
  virtual bool quiescent() const = 0;
  /// After a failed run: gives queued abort messages up to `grace_s` to leave, then drops
  /// every pending operation so the transport can be destroyed.
  virtual void drain_after_failure(double grace_s) = 0;

  // The collectives (launch::Collectives) are called by every rank between runs, with no run
  // in progress. farewell: after a failed run, every process that knows of the failure calls
  // it once, so that each has reported the failure before any of them ends the job.
};

}  // namespace compass::backends::cpu
