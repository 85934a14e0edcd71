#include "compass/core/dtype.hpp"

namespace compass {

int dtype_bytes(DType t) {
  switch (t) {
    case DType::fp32: return 4;
    case DType::fp16: return 2;
    case DType::bf16: return 2;
    case DType::fp8: return 1;
  }
  return 0;
}

std::string_view to_string(DType t) {
  switch (t) {
    case DType::fp32: return "fp32";
    case DType::fp16: return "fp16";
    case DType::bf16: return "bf16";
    case DType::fp8: return "fp8";
  }
  return "?";
}

std::optional<DType> parse_dtype(std::string_view s) {
  for (DType t : {DType::fp32, DType::fp16, DType::bf16, DType::fp8})
    if (to_string(t) == s) return t;
  return std::nullopt;
}

}  // namespace compass
