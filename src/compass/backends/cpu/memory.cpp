#include "compass/backends/cpu/memory.hpp"

#include <fstream>
#include <sstream>

namespace compass::backends::cpu {

namespace {
std::string mib(std::int64_t bytes) {
  return fmt::format("{:.1f} MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
}
}  // namespace

Result<std::int64_t> memory_available_bytes() {
  std::ifstream in("/proc/meminfo");
  if (!in) return make_error("/proc/meminfo: cannot open it to read MemAvailable");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("MemAvailable:", 0) != 0) continue;
    std::istringstream fields(line.substr(13));
    std::int64_t kib = -1;
    std::string unit;
    fields >> kib >> unit;
    if (kib < 0 || unit != "kB") return make_error("/proc/meminfo: cannot parse '{}'", line);
    return kib * 1024;
  }
  return make_error("/proc/meminfo: no MemAvailable line");
}

Result<std::int64_t> memory_limit_bytes(std::int64_t limit_bytes) {
  if (limit_bytes > 0) return limit_bytes;
  COMPASS_ASSIGN(std::int64_t available, memory_available_bytes());
  // Leave a quarter for the rest of the process and the machine (other ranks' stacks, BLAS
  // packing buffers, the OS page cache).
  return available / 4 * 3;
}

Status check_memory(std::int64_t needed_bytes, std::int64_t limit_bytes, const std::string& what) {
  COMPASS_ASSIGN(std::int64_t limit, memory_limit_bytes(limit_bytes));
  if (needed_bytes < 0 || needed_bytes > limit)
    return make_error(
        "{} need {} ({} bytes) but the memory limit is {} ({} bytes; 75% of "
        "MemAvailable unless set)",
        what, mib(needed_bytes), needed_bytes, mib(limit), limit);
  return Status::success();
}

}  // namespace compass::backends::cpu
