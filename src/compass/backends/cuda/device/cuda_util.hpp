#pragma once
// Error checking and RAII owners for CUDA runtime objects (host code, compiled by the C++
// compiler against the CUDA headers). Every CUDA call goes through cuda_check(), which turns a
// failure into a compass::Error naming the call and what it was doing.

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "compass/core/result.hpp"

namespace compass::backends::cuda::device {

/// Ok, or an error "<call> failed for <context>: <CUDA message> (<code name>)".
Status cuda_check(cudaError_t e, std::string_view call, std::string_view context);

/// Checks a CUDA runtime call and returns its error from the enclosing function.
#define COMPASS_CUDA(call, context) COMPASS_TRY(::compass::backends::cuda::device::cuda_check((call), #call, (context)))

/// Device memory on one device, freed on destruction.
class DeviceMemory {
 public:
  DeviceMemory() = default;
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;
  DeviceMemory(DeviceMemory&& o) noexcept { swap(o); }
  DeviceMemory& operator=(DeviceMemory&& o) noexcept {
    DeviceMemory tmp(std::move(o));
    swap(tmp);
    return *this;
  }
  ~DeviceMemory();
  /// Allocates `bytes` on `device` (made current); the error names `what`.
  static Result<DeviceMemory> allocate(int device, std::int64_t bytes, std::string_view what);
  void* get() const { return ptr_; }
  std::int64_t bytes() const { return bytes_; }
  int device() const { return device_; }

 private:
  void swap(DeviceMemory& o) noexcept {
    std::swap(ptr_, o.ptr_);
    std::swap(bytes_, o.bytes_);
    std::swap(device_, o.device_);
  }
  void* ptr_ = nullptr;
  std::int64_t bytes_ = 0;
  int device_ = 0;
};

/// A stream on one device, destroyed on destruction.
class Stream {
 public:
  Stream() = default;
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  Stream(Stream&& o) noexcept : s_(std::exchange(o.s_, nullptr)), device_(o.device_) {}
  Stream& operator=(Stream&& o) noexcept {
    std::swap(s_, o.s_);
    std::swap(device_, o.device_);
    return *this;
  }
  ~Stream();
  /// A non-blocking stream with priority `priority` (CUDA's scale: lower is more urgent).
  static Result<Stream> create(int device, int priority);
  cudaStream_t get() const { return s_; }
  int device() const { return device_; }

 private:
  cudaStream_t s_ = nullptr;
  int device_ = 0;
};

/// An event on one device, destroyed on destruction.
class Event {
 public:
  Event() = default;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  Event(Event&& o) noexcept : e_(std::exchange(o.e_, nullptr)), device_(o.device_) {}
  Event& operator=(Event&& o) noexcept {
    std::swap(e_, o.e_);
    std::swap(device_, o.device_);
    return *this;
  }
  ~Event();
  /// timing=false creates a cheaper event for dependencies only.
  static Result<Event> create(int device, bool timing);
  cudaEvent_t get() const { return e_; }
  int device() const { return device_; }

 private:
  cudaEvent_t e_ = nullptr;
  int device_ = 0;
};

/// Milliseconds between two recorded timing events, as seconds.
Result<double> elapsed_s(const Event& start, const Event& stop);

/// Name, "sm_XY" and SM count of a device.
struct DeviceInfo {
  std::string name;
  std::string arch;
  int sm_count = 0;
};
Result<DeviceInfo> device_info(int device);

}  // namespace compass::backends::cuda::device
