#include "compass/backends/cuda/device/nccl_comm.hpp"

#include <dlfcn.h>

#include <chrono>
#include <cstring>
#include <thread>

#if defined(COMPASS_HAVE_NCCL_HEADER)
#include <nccl.h>
#endif

namespace compass::backends::cuda::device {

using Clock = std::chrono::steady_clock;

#if defined(COMPASS_HAVE_NCCL_HEADER)

// The entry points one rank of a communicator needs, from dlopen.
struct NcclComm::Lib {
  void* handle = nullptr;
  decltype(&ncclGetVersion) get_version = nullptr;
  decltype(&ncclGetUniqueId) get_unique_id = nullptr;
  decltype(&ncclCommInitRankConfig) init_rank_config = nullptr;
  decltype(&ncclCommGetAsyncError) async_error = nullptr;
  decltype(&ncclCommAbort) abort = nullptr;
  decltype(&ncclCommFinalize) finalize = nullptr;
  decltype(&ncclCommDestroy) destroy = nullptr;
  decltype(&ncclAllGather) all_gather = nullptr;
  decltype(&ncclReduceScatter) reduce_scatter = nullptr;
  decltype(&ncclAllReduce) all_reduce = nullptr;
  decltype(&ncclGetErrorString) error_string = nullptr;

  ~Lib() {
    if (handle != nullptr) dlclose(handle);
  }
  static Result<std::unique_ptr<Lib>> load() {
    auto lib = std::make_unique<Lib>();
    lib->handle = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (lib->handle == nullptr)
      return make_error("libnccl.so.2 could not be loaded ({}); put NCCL's lib directory on "
                        "LD_LIBRARY_PATH",
                        dlerror());
    bool ok = true;
    auto sym = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib->handle, name));
      ok = ok && fn != nullptr;
    };
    sym(lib->get_version, "ncclGetVersion");
    sym(lib->get_unique_id, "ncclGetUniqueId");
    sym(lib->init_rank_config, "ncclCommInitRankConfig");
    sym(lib->async_error, "ncclCommGetAsyncError");
    sym(lib->abort, "ncclCommAbort");
    sym(lib->finalize, "ncclCommFinalize");
    sym(lib->destroy, "ncclCommDestroy");
    sym(lib->all_gather, "ncclAllGather");
    sym(lib->reduce_scatter, "ncclReduceScatter");
    sym(lib->all_reduce, "ncclAllReduce");
    sym(lib->error_string, "ncclGetErrorString");
    if (!ok) return make_error("libnccl.so.2 lacks an entry point compass needs (NCCL too old?)");
    return lib;
  }
};

namespace {

ncclDataType_t nccl_type(DType t) {
  switch (t) {
    case DType::fp16: return ncclFloat16;
    case DType::bf16: return ncclBfloat16;
    default: return ncclFloat32;
  }
}

ncclComm_t as_comm(void* c) { return static_cast<ncclComm_t>(c); }

}  // namespace

NcclComm::NcclComm() = default;

// A healthy communicator is finalized (bounded: a peer that is gone cannot hang us) and
// destroyed; any other is aborted.
NcclComm::~NcclComm() {
  if (comm_ == nullptr) return;
  if (healthy_) {
    const ncclResult_t r = lib_->finalize(as_comm(comm_));
    healthy_ = (r == ncclSuccess || r == ncclInProgress) && wait("ncclCommFinalize").ok();
  }
  (void)(healthy_ ? lib_->destroy(as_comm(comm_)) : lib_->abort(as_comm(comm_)));
}

Result<int> NcclComm::loaded_version() {
  COMPASS_ASSIGN(const std::unique_ptr<Lib> lib, Lib::load());
  int code = 0;
  if (lib->get_version(&code) != ncclSuccess) return make_error("ncclGetVersion failed");
  return code;
}

Status NcclComm::check(int result, const std::string& what) {
  const auto r = static_cast<ncclResult_t>(result);
  if (r == ncclSuccess) return Status::success();
  if (r == ncclInProgress) return wait(what);
  healthy_ = false;
  return make_error("rank {}: {} failed: {}", rank_, what, lib_->error_string(r));
}

// Polls the communicator until it is no longer in progress, at most the timeout.
Status NcclComm::wait(const std::string& what) {
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(timeout_s_));
  for (int polls = 1;; ++polls) {
    ncclResult_t state = ncclSuccess;
    const ncclResult_t r = lib_->async_error(as_comm(comm_), &state);
    if (r != ncclSuccess) state = r;
    if (state == ncclSuccess) return Status::success();
    if (state != ncclInProgress) {
      healthy_ = false;
      return make_error("rank {}: {} failed: {}", rank_, what, lib_->error_string(state));
    }
    if (Clock::now() > deadline) {
      healthy_ = false;
      return make_error("rank {}: {} did not finish within {:.3g} s (is every rank running?)",
                        rank_, what, timeout_s_);
    }
    if (polls % 64 == 0 && group_ != nullptr) {
      if (Status peers = group_->peers_ok(); !peers.ok()) {
        healthy_ = false;
        return peers;
      }
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

Result<std::unique_ptr<NcclComm>> NcclComm::create(launch::ProcessGroup& group,
                                                   double timeout_s) {
  std::unique_ptr<NcclComm> c(new NcclComm());
  c->group_ = &group;
  c->rank_ = group.rank();
  c->timeout_s_ = timeout_s;
  COMPASS_ASSIGN(c->lib_, Lib::load());
  ncclUniqueId id{};
  std::string mine;
  if (group.rank() == 0) {
    const ncclResult_t r = c->lib_->get_unique_id(&id);
    if (r != ncclSuccess)
      return make_error("rank 0: ncclGetUniqueId failed: {}", c->lib_->error_string(r));
    mine.assign(reinterpret_cast<const char*>(&id), sizeof id);
  }
  COMPASS_ASSIGN(const auto ids, group.all_gather(mine, timeout_s));
  if (ids.empty() || ids[0].size() != sizeof id)
    return make_error("rank {}: rank 0 sent no NCCL unique id", group.rank());
  std::memcpy(&id, ids[0].data(), sizeof id);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;  // returns at once; completion is polled with a bound (wait)
  ncclComm_t comm = nullptr;
  const ncclResult_t r = c->lib_->init_rank_config(&comm, group.size(), id, group.rank(), &config);
  c->comm_ = comm;
  if (r != ncclSuccess && r != ncclInProgress)
    return make_error("rank {}: ncclCommInitRankConfig failed: {}", group.rank(),
                      c->lib_->error_string(r));
  COMPASS_TRY(c->wait("ncclCommInitRankConfig"));
  return c;
}

Status NcclComm::all_gather(const void* send, void* recv, std::int64_t count, DType t,
                            cudaStream_t st) {
  return check(lib_->all_gather(send, recv, static_cast<size_t>(count), nccl_type(t),
                                as_comm(comm_), st),
               "ncclAllGather");
}

Status NcclComm::reduce_scatter(const void* send, void* recv, std::int64_t count, DType t,
                                cudaStream_t st) {
  return check(lib_->reduce_scatter(send, recv, static_cast<size_t>(count), nccl_type(t), ncclSum,
                                    as_comm(comm_), st),
               "ncclReduceScatter");
}

Status NcclComm::all_reduce(const void* send, void* recv, std::int64_t count, DType t,
                            cudaStream_t st) {
  return check(lib_->all_reduce(send, recv, static_cast<size_t>(count), nccl_type(t), ncclSum,
                                as_comm(comm_), st),
               "ncclAllReduce");
}

#else  // built without nccl.h

struct NcclComm::Lib {};
NcclComm::NcclComm() = default;
NcclComm::~NcclComm() = default;
Result<int> NcclComm::loaded_version() { return make_error("built without nccl.h"); }
Result<std::unique_ptr<NcclComm>> NcclComm::create(launch::ProcessGroup&, double) {
  return make_error("built without nccl.h: the sequential strategy cannot use NCCL");
}
Status NcclComm::check(int, const std::string&) { return Status::success(); }
Status NcclComm::wait(const std::string&) { return Status::success(); }
Status NcclComm::all_gather(const void*, void*, std::int64_t, DType, cudaStream_t) {
  return make_error("built without nccl.h");
}
Status NcclComm::reduce_scatter(const void*, void*, std::int64_t, DType, cudaStream_t) {
  return make_error("built without nccl.h");
}
Status NcclComm::all_reduce(const void*, void*, std::int64_t, DType, cudaStream_t) {
  return make_error("built without nccl.h");
}

#endif

}  // namespace compass::backends::cuda::device
