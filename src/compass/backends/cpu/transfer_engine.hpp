#pragma once
// How the CPU executor moves bytes between ranks. Every transfer task goes through a
// TransferEngine, so a paced engine that emulates a machine's links (occupy the links
// on the route, finish after latency + bytes / bandwidth with fair sharing) can replace the
// plain memory copy without touching the executor.

#include <cstdint>
#include <stop_token>

#include "compass/schedule/schedule.hpp"

namespace compass::backends::cpu {

/// One transfer task, resolved to memory: rows x cols FP32 elements from src to dst.
struct TransferRequest {
  const schedule::Task* task = nullptr;  ///< the schedule task (channel, step, chunk, name)
  int src_rank = 0;                      ///< rank owning the source buffer
  int dst_rank = 0;                      ///< rank owning the destination buffer
  std::int64_t bytes = 0;                ///< bytes in the operator's dtype (what a GPU would move)
  const float* src = nullptr;
  std::int64_t src_ld = 0;  ///< row stride of src in elements
  float* dst = nullptr;
  std::int64_t dst_ld = 0;  ///< row stride of dst in elements
  std::int64_t rows = 0;
  std::int64_t cols = 0;
};

/// Moves the bytes of transfer tasks. Called concurrently from every copy-engine thread of
/// every rank, so implementations must be thread-safe.
class TransferEngine {
 public:
  virtual ~TransferEngine() = default;
  /// Performs the copy; may wait (pacing) but must return soon after `stop` is requested.
  /// Throws on failure (the executor turns it into an error naming the task).
  virtual void transfer(const TransferRequest& request, std::stop_token stop) = 0;
};

/// The default engine: a plain row-by-row memcpy, as fast as the memory system allows.
class MemcpyTransferEngine final : public TransferEngine {
 public:
  void transfer(const TransferRequest& request, std::stop_token stop) override;
};

/// Copies a rows x cols block between two row-major matrices with the given strides.
void copy_block(const float* src, std::int64_t src_ld, float* dst, std::int64_t dst_ld,
                std::int64_t rows, std::int64_t cols);

}  // namespace compass::backends::cpu
