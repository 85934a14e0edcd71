#pragma once
// Element types of GEMM operands.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace compass {

enum class DType { fp32, fp16, bf16, fp8 };

/// Bytes per element.
int dtype_bytes(DType t);
/// Canonical lower-case name ("bf16").
std::string_view to_string(DType t);
/// Parses a canonical name; nullopt when unknown.
std::optional<DType> parse_dtype(std::string_view s);

}  // namespace compass
