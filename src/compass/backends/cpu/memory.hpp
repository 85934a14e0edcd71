#pragma once
// How much memory the CPU backend may use, so oversized operators fail with a clear error
// instead of being killed by the kernel's OOM killer halfway through allocation.

#include <cstdint>
#include <string>

#include "compass/core/result.hpp"

namespace compass::backends::cpu {

/// MemAvailable from /proc/meminfo in bytes; an error when the file or line is missing.
Result<std::int64_t> memory_available_bytes();

/// The allocation limit: `limit_bytes` when positive, else 75% of MemAvailable.
Result<std::int64_t> memory_limit_bytes(std::int64_t limit_bytes);

/// Ok when `needed_bytes` fits the limit; the error names `what`, the need and the limit.
Status check_memory(std::int64_t needed_bytes, std::int64_t limit_bytes, const std::string& what);

}  // namespace compass::backends::cpu
