#pragma once
// The program of sequential and decompose:d (docs/schedule.md, "sequential and decompose:d"):
// per part, NCCL-style ring collectives on copy engine 0 beside one GEMM kernel per part on the
// compute stream. One home for their pattern: the generator lowers it to tasks (generate.cpp:
// buffers, regions and names), and the model follows it (model/decompose.cpp), as the
// timeline does for a schedule that is its lowering (model/timeline.cpp). Programs carry rows,
// never prices.

#include <array>
#include <cstdint>
#include <vector>

#include "compass/schedule/generate.hpp"
#include "compass/schedule/strategy.hpp"
#include "compass/workload/operator.hpp"

namespace compass::schedule {

struct CollectiveProgram {
  /// What a step does. Steps on copy engine 0: copy_own and send; the others run on the
  /// compute stream.
  enum class Role : std::uint8_t {
    gemm,          ///< part `part`'s GEMM of `rows` output rows
    copy_own,      ///< AG-GEMM: the own block into the gathered input
    copy_out,      ///< AG-GEMM, staged: the part's output rows back to their places
    copy_in,       ///< GEMM-RS/AR, staged: the part's input rows staged part-major
    copy_partial,  ///< GEMM-RS/AR: the own block's partial into the output
    send,          ///< a ring step: `rank` sends the block of `chunk` to its successor
    add,           ///< GEMM-RS/AR: the received block of `chunk` added into the local one
  };
  struct Step {
    Role role = Role::gemm;
    int rank = 0;
    int part = 0;
    int phase = 0;          ///< send: 0 the reduce-scatter or all-gather, 1 GEMM-AR's all-gather
    int ring_step = 0;      ///< send and add: the step of the ring collective
    int chunk = 0;          ///< send and add: the block's chunk (its owner on the ring)
    int copies = 1;         ///< copy_out and copy_in: equal copies, one per chunk
    std::int64_t rows = 0;  ///< rows of the GEMM, of one copy, or of the block
    /// Steps whose end it waits for, besides the step before it on its resource (-1: none).
    std::array<int, 2> waits{-1, -1};
    bool operator==(const Step&) const = default;
    /// The tasks the generator lowers it to: one per copy, else one; none when it has no rows
    /// (a chunk of gemm_ar with fewer rows than ranks: the generator skips empty tasks).
    int tasks() const {
      if (rows <= 0) return 0;
      return role == Role::copy_in || role == Role::copy_out ? copies : 1;
    }
  };
  std::vector<Step> steps;  ///< in the order the generator emits them as tasks
  /// Every step once, in the order the model follows them: the emitted order, except that
  /// AG-GEMM's collectives all come before its GEMMs, and a GEMM-RS/AR part's step-0 sends
  /// before the next part's GEMMs (the ones emitted ahead of them). Each step comes after the
  /// steps it waits for and after the steps before it on its resource.
  std::vector<int> follow;
  bool operator==(const CollectiveProgram&) const = default;

  static bool on_copy_engine(Role r) { return r == Role::copy_own || r == Role::send; }
};

/// The program of `op` under sequential (decompose:1) or decompose:d along `plan.ring`.
/// Requires a valid op, strategy.kind sequential or decompose with check_decompose(op, d) ok,
/// and plan.ring listing ranks 0..tp-1 once each (generate checks all three).
///  - AG-GEMM, per part i: every rank copies its own block of part i into the gathered input,
///    then the ring all-gather's p - 1 steps (step s forwards what arrived at step s - 1);
///    then the part's GEMM on every rank and, when staged (d > 1), its output copied back.
///  - GEMM-RS / GEMM-AR: part 0's GEMM, then per part i the GEMM of part i + 1 (staged input
///    copied first), the own block's partial into the output (unless it is computed there),
///    the ring reduce-scatter (per step the sends, then the adds of what arrived), and for
///    GEMM-AR the ring all-gather of the sums.
CollectiveProgram collective_program(const workload::OperatorSpec& op, const Strategy& strategy,
                                     const CommPlan& plan);

}  // namespace compass::schedule
