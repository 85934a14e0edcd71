#pragma once
// The state of one rank of a schedule run with one process per GPU (device code only, private
// to device/): this rank's buffers, the other ranks' buffers and flag arrays mapped through
// CUDA IPC (or an NCCL communicator for the sequential strategy), streams, events, GEMM plans.
// Methods live in process_run.cpp (setup and the timed run) and process_check.cpp (the
// --check reference and the comparison).
#include <cuda.h>  // types of the stream memory operations only; no libcuda link
#include <cuda_runtime_api.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "compass/backends/cuda/device/nccl_comm.hpp"
#include "compass/backends/cuda/device/process_entry.hpp"
#include "compass/backends/cuda/device/run.hpp"
#include "compass/backends/cuda/process_plan.hpp"

namespace compass::backends::cuda::device {

/// A peer's allocation opened with cudaIpcOpenMemHandle, closed on destruction.
class IpcMapping {
 public:
  IpcMapping() = default;
  explicit IpcMapping(void* p) : p_(p) {}
  IpcMapping(IpcMapping&& o) noexcept : p_(std::exchange(o.p_, nullptr)) {}
  IpcMapping& operator=(IpcMapping&& o) noexcept {
    std::swap(p_, o.p_);
    return *this;
  }
  IpcMapping(const IpcMapping&) = delete;
  IpcMapping& operator=(const IpcMapping&) = delete;
  ~IpcMapping();
  void* get() const { return p_; }

 private:
  void* p_ = nullptr;
};

/// Everything a ProcessRun owns on the GPU, destroyed in reverse order (the communicator and
/// GEMM plans first, memory last). After a wait timed out it is left to the end of the
/// process: freeing memory waits for the stuck streams.
struct ProcessResources {
  std::vector<DeviceMemory> mem;      // this rank's buffers (others empty)
  DeviceMemory flags;                 // one 32-bit flag per task, written by the producers
  std::vector<IpcMapping> mapped;     // the other ranks' buffers and flags
  Stream aux;                         // zeroing, filling, the check
  std::map<int, Stream> streams;      // plan stream index -> stream (this rank's)
  std::map<int, Event> events;        // plan event index -> event (producers of this rank)
  std::vector<Event> stream_end;
  Event start, stop;
  LtHandle lt;
  std::map<int, DeviceMemory> workspace;  // per plan stream with GEMMs
  std::map<int, LtGemm> gemms;            // task id -> plan
  std::unique_ptr<NcclComm> nccl;
};

class ProcessRun {
 public:
  ProcessRun(const schedule::Schedule& s, const ProcessRunOptions& o, launch::ProcessGroup& g);
  ~ProcessRun();
  ProcessRun(const ProcessRun&) = delete;
  ProcessRun& operator=(const ProcessRun&) = delete;

  Status setup();
  Result<Measurement> measure();
  const RunInfo& info() const { return info_; }

 private:
  char* ptr(const schedule::Region& r) const {
    const schedule::Buffer& b = s_.buffers[static_cast<std::size_t>(r.buffer)];
    return ptr_[static_cast<std::size_t>(r.buffer)] + (r.row * b.cols + r.col) * eb_;
  }
  std::int64_t ld(const schedule::Region& r) const {
    return s_.buffers[static_cast<std::size_t>(r.buffer)].cols;
  }
  bool mine(int buffer) const { return s_.buffers[static_cast<std::size_t>(buffer)].rank == me_; }
  int task_rank(int task) const { return s_.tasks[static_cast<std::size_t>(task)].resource.rank; }
  std::string label(int task) const;

  // process_run.cpp: setup
  Status select_device();
  Status allocate_and_fill();
  Status fill(int index, void* dst);
  Status exchange_ipc();
  Status open_peer(int rank, const std::string& bytes);
  Status exchange_gpu_ids(std::vector<std::string>& ids);
  Status prepare_nccl();
  Status create_streams();
  Status prepare_gemms();
  // process_run.cpp: the timed run
  Status start_iteration();
  Result<double> iteration();
  Status issue(const TaskIssue& is);
  Status run_task(const schedule::Task& t, cudaStream_t st, void* workspace);
  Status signal(const schedule::Task& t, cudaStream_t st);
  Status issue_nccl(cudaStream_t st);
  Status wait_bounded(const Event& e, const std::string& what);
  std::string stuck_message();
  cudaStream_t first_stream() const;
  // process_check.cpp
  Status check(CheckResult& out);
  Status reference_output(DeviceMemory& Y);
  Result<RankError> compare_mine(const DeviceMemory& Y);
  Result<bool> inputs_modified();

  const schedule::Schedule& s_;
  const ProcessRunOptions& o_;
  launch::ProcessGroup& g_;
  const int me_;
  const std::int64_t eb_;
  int dev_ = 0;
  bool nccl_path_ = false;
  bool stuck_ = false;
  cuuint32_t iteration_ = 0;
  RunInfo info_;
  ProcessPlan pp_;
  std::optional<NcclCall> call_;
  StreamMemOps mem_ops_;
  std::vector<char*> ptr_;         // every buffer: this rank's or a mapped peer's
  std::vector<char*> peer_flags_;  // every rank's flag array, mapped
  std::unique_ptr<ProcessResources> res_;
};

}  // namespace compass::backends::cuda::device
