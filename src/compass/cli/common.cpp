#include "compass/cli/common.hpp"

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "compass/hardware/profile_io.hpp"

namespace compass::cli {

std::string parse_links_option(const std::string& text) {
  const std::string prefix = "emulated:";
  if (text.rfind(prefix, 0) != 0 || text.size() == prefix.size())
    throw UsageError(fmt::format("--links: expected emulated:<preset|file>, got '{}'", text));
  return text.substr(prefix.size());
}

std::optional<double> parse_link_scale(const std::string& text) {
  if (text == "auto") return std::nullopt;
  double f = 0;
  std::size_t used = 0;
  try {
    f = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || !(f > 0) || !std::isfinite(f))
    throw UsageError(
        fmt::format("--link-scale: expected a positive number or 'auto', got '{}'", text));
  return f;
}

hardware::Profile load_profile(const std::string& preset_or_path) {
  return unwrap(hardware::resolve_profile(preset_or_path));
}

workload::OperatorSpec operator_from_flags(const std::string& op, std::int64_t m, std::int64_t n,
                                           std::int64_t k, int tp, const std::string& dtype) {
  const auto kind = workload::parse_op_kind(op);
  if (!kind)
    throw UsageError(
        fmt::format("--op: unknown operator '{}' (expected ag_gemm, gemm_rs or gemm_ar)", op));
  if (m <= 0) throw UsageError(fmt::format("--m: must be positive, got {}", m));
  if (n <= 0) throw UsageError(fmt::format("--n: must be positive, got {}", n));
  if (k <= 0) throw UsageError(fmt::format("--k: must be positive, got {}", k));
  if (tp <= 0) throw UsageError(fmt::format("--tp: must be positive, got {}", tp));
  const auto type = parse_dtype(dtype);
  if (!type)
    throw UsageError(
        fmt::format("--dtype: unknown type '{}' (expected fp32, fp16, bf16 or fp8)", dtype));
  workload::OperatorSpec spec;
  spec.kind = *kind;
  spec.m = m;
  spec.n = n;
  spec.k = k;
  spec.tp = tp;
  spec.dtype = *type;
  return spec;
}

std::vector<int> parse_gpu_list(const std::string& text) {
  std::vector<int> out;
  std::size_t pos = 0;
  while (pos <= text.size()) {
    std::size_t comma = text.find(',', pos);
    std::string item = text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    if (item.empty()) throw UsageError(fmt::format("--gpus: empty item in '{}'", text));
    std::size_t used = 0;
    int v = -1;
    try {
      v = std::stoi(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != item.size() || v < 0)
      throw UsageError(fmt::format("--gpus: '{}' is not a GPU number", item));
    out.push_back(v);
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return out;
}

std::vector<int> select_group(const hardware::Profile& p, int tp, const std::string& gpus) {
  const int n = p.gpu_count();
  if (tp < 0) throw UsageError(fmt::format("--tp: must be positive, got {}", tp));
  std::vector<int> group;
  if (!gpus.empty()) {
    group = parse_gpu_list(gpus);
    if (tp > 0 && static_cast<int>(group.size()) != tp)
      throw UsageError(fmt::format("--gpus lists {} GPUs but --tp is {}", group.size(), tp));
    for (int g : group)
      if (g >= n)
        throw UsageError(fmt::format("--gpus: GPU {} does not exist on '{}' ({} GPUs)", g, p.name, n));
  } else {
    int size = tp > 0 ? tp : n;
    if (size > n)
      throw UsageError(fmt::format("--tp {} is larger than the machine '{}' ({} GPUs)", size, p.name, n));
    for (int i = 0; i < size; ++i) group.push_back(i);
  }
  return group;
}

std::string format_seconds(double s) { return format_duration(s, 3); }

std::string format_bandwidth(double b) { return fmt::format("{:.1f} GB/s", b / 1e9); }

std::string format_bytes(double b) {
  if (b >= 1024.0 * 1024 * 1024) return fmt::format("{:.2f} GiB", b / (1024.0 * 1024 * 1024));
  if (b >= 1024.0 * 1024) return fmt::format("{:.2f} MiB", b / (1024.0 * 1024));
  if (b >= 1024.0) return fmt::format("{:.2f} KiB", b / 1024.0);
  return fmt::format("{:.0f} B", b);
}

void write_file(const std::string& path, const std::string& text, bool overwrite) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!overwrite && fs::exists(path, ec))
    throw UsageError(fmt::format("{}: file exists; pass --force to overwrite it", path));
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) throw UsageError(fmt::format("{}: cannot open for writing", path));
  f << text;
  if (!f) throw UsageError(fmt::format("{}: write failed", path));
}

bool stderr_is_terminal() { return isatty(STDERR_FILENO) != 0; }

}  // namespace compass::cli
