#include "compass/backends/cuda/device/cuda_util.hpp"

namespace compass::backends::cuda::device {

Status cuda_check(cudaError_t e, std::string_view call, std::string_view context) {
  if (e == cudaSuccess) return Status::success();
  // Clear a sticky-free error so the next call does not report it again.
  (void)cudaGetLastError();
  std::string_view name = call.substr(0, call.find('('));
  return make_error("{} failed for {}: {} ({})", name, context, cudaGetErrorString(e),
                    cudaGetErrorName(e));
}

DeviceMemory::~DeviceMemory() {
  if (ptr_ != nullptr) {
    // Destructors cannot report; freeing can only fail after an earlier, reported error.
    (void)cudaSetDevice(device_);
    (void)cudaFree(ptr_);
  }
}

Result<DeviceMemory> DeviceMemory::allocate(int device, std::int64_t bytes, std::string_view what) {
  DeviceMemory m;
  m.device_ = device;
  m.bytes_ = bytes;
  COMPASS_CUDA(cudaSetDevice(device), what);
  if (bytes > 0) {
    COMPASS_TRY(cuda_check(cudaMalloc(&m.ptr_, static_cast<size_t>(bytes)), "cudaMalloc",
                           fmt::format("{} ({} bytes on GPU {})", what, bytes, device)));
  }
  return m;
}

Stream::~Stream() {
  if (s_ != nullptr) {
    (void)cudaSetDevice(device_);
    (void)cudaStreamDestroy(s_);
  }
}

Result<Stream> Stream::create(int device, int priority) {
  Stream s;
  s.device_ = device;
  COMPASS_CUDA(cudaSetDevice(device), "creating a stream");
  COMPASS_CUDA(cudaStreamCreateWithPriority(&s.s_, cudaStreamNonBlocking, priority),
               fmt::format("a stream on GPU {}", device));
  return s;
}

Event::~Event() {
  if (e_ != nullptr) {
    (void)cudaSetDevice(device_);
    (void)cudaEventDestroy(e_);
  }
}

Result<Event> Event::create(int device, bool timing) {
  Event e;
  e.device_ = device;
  COMPASS_CUDA(cudaSetDevice(device), "creating an event");
  COMPASS_CUDA(cudaEventCreateWithFlags(&e.e_, timing ? cudaEventDefault : cudaEventDisableTiming),
               fmt::format("an event on GPU {}", device));
  return e;
}

Result<double> elapsed_s(const Event& start, const Event& stop) {
  float ms = 0;
  COMPASS_CUDA(cudaEventSynchronize(stop.get()), "timing");
  COMPASS_CUDA(cudaEventElapsedTime(&ms, start.get(), stop.get()), "timing");
  return static_cast<double>(ms) * 1e-3;
}

Result<DeviceInfo> device_info(int device) {
  cudaDeviceProp prop{};
  COMPASS_CUDA(cudaGetDeviceProperties(&prop, device), fmt::format("GPU {}", device));
  DeviceInfo info;
  info.name = prop.name;
  info.arch = fmt::format("sm_{}{}", prop.major, prop.minor);
  info.sm_count = prop.multiProcessorCount;
  return info;
}

}  // namespace compass::backends::cuda::device
