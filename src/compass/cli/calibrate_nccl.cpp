#include "compass/cli/calibrate_nccl.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "compass/cli/common.hpp"
#include "compass/hardware/profile_io.hpp"
#include "compass/measure/nccl_fit.hpp"

namespace compass::cli {

namespace {

constexpr std::uint64_t kMaxLogBytes = std::uint64_t{64} << 20;  // an nccl-tests log is KiBs

std::string size_text(double b) {
  if (b >= 1024.0 * 1024 * 1024) return fmt::format("{:g}G", b / (1024.0 * 1024 * 1024));
  if (b >= 1024.0 * 1024) return fmt::format("{:g}M", b / (1024.0 * 1024));
  if (b >= 1024.0) return fmt::format("{:g}K", b / 1024.0);
  return fmt::format("{:g}", b);
}

double error_pct(double predicted, double measured) {
  return measured > 0 ? 100.0 * (predicted - measured) / measured : 0.0;
}

}  // namespace

void run_calibrate_from_nccl_tests(const NcclFitArgs& a) {
  const std::string profile_name = a.profile.empty() ? "a6000x8" : a.profile;
  const hardware::Profile base = load_profile(profile_name);
  if (a.out == "-" && a.json.to_stdout())
    throw UsageError("--out - and --json both write to stdout; write one of them to a file");
  check_outputs({{"--out", a.out}, {"--json-out", a.json.file()}}, a.force);
  std::vector<measure::NcclLog> logs;
  for (const std::string& path : a.logs) logs.push_back(unwrap(measure::parse_nccl_tests_log(read_input_file(path, kMaxLogBytes), path)));
  const measure::FitResult fit = unwrap(measure::fit_to_nccl_tests(base, logs));
  unwrap(hardware::validate(fit.profile));
  // The profile and the JSON are written together or not at all.
  StagedOutputs outputs;
  outputs.add({"--out", a.out}, hardware::profile_to_json(fit.profile), a.force);

  if (a.json.any()) {
    nlohmann::ordered_json j;
    j["profile"] = base.name;
    j["logs"] = nlohmann::ordered_json::array();
    for (const auto& f : fit.logs) {
      nlohmann::ordered_json lj;
      lj["log"] = f.origin;
      lj["test"] = std::string(measure::to_string(f.test));
      lj["ranks"] = f.ranks;
      lj["gpus"] = f.gpus;
      lj["large_max_error"] = f.large_max_error;
      lj["unexplained"] = f.unexplained;
      lj["points"] = nlohmann::ordered_json::array();
      for (const auto& p : f.points)
        lj["points"].push_back({{"size_bytes", p.size_bytes},
                                {"measured_busbw_gbs", p.measured_busbw},
                                {"before_busbw_gbs", p.before_busbw},
                                {"after_busbw_gbs", p.after_busbw},
                                {"large", p.large}});
      j["logs"].push_back(std::move(lj));
    }
    j["changes"] = nlohmann::ordered_json::array();
    for (const auto& c : fit.changes)
      j["changes"].push_back({{"link", c.link},
                              {"bandwidth_before", c.bandwidth_before},
                              {"bandwidth_after", c.bandwidth_after},
                              {"latency_before_s", c.latency_before},
                              {"latency_after_s", c.latency_after},
                              {"why", c.why}});
    j["notes"] = fit.notes;
    j["out"] = a.out;
    a.json.stage(outputs, j, a.force);
  }
  outputs.commit();
  if (a.json.to_stdout()) return;
  // With the profile on stdout the table goes to stderr.
  std::FILE* human = a.out == "-" ? stderr : stdout;

  print_to(human, "fit of profile {} to {} nccl-tests log{}\n", base.name, logs.size(), logs.size() == 1 ? "" : "s");
  for (std::size_t i = 0; i < fit.logs.size(); ++i) {
    const auto& f = fit.logs[i];
    print_to(human, "\n{}: {}, {} ranks on GPUs {}\n", f.origin, measure::to_string(f.test), f.ranks, fmt::join(f.gpus, ","));
    for (const std::string& n : logs[i].notes) print_to(human, "  note: {}\n", n);
    print_to(human, "  {:>8} {:>12} {:>12} {:>8} {:>12} {:>8}\n", "size", "measured", "before", "error", "fitted", "error");
    for (const auto& p : f.points)
      print_to(human, "  {:>8} {:>9.2f} GB {:>9.2f} GB {:>7.1f}% {:>9.2f} GB {:>7.1f}%{}\n", size_text(p.size_bytes),
                 p.measured_busbw, p.before_busbw, error_pct(p.before_busbw, p.measured_busbw), p.after_busbw,
                 error_pct(p.after_busbw, p.measured_busbw), p.large ? "  *" : "");
    double before_max = 0;
    for (const auto& p : f.points)
      if (p.large && p.measured_busbw > 0)
        before_max = std::max(before_max, std::abs(p.before_busbw - p.measured_busbw) / p.measured_busbw);
    print_to(human, "  (busbw in GB/s; * = large sizes, used for the fit: max error {:.1f}% before, {:.1f}% "
               "fitted)\n",
               100 * before_max, 100 * f.large_max_error);
    for (const std::string& u : f.unexplained) print_to(human, "  cannot explain: {}\n", u);
  }
  print_to(human, "\nlinks changed: {}\n", fit.changes.size());
  for (const auto& c : fit.changes)
    print_to(human, "  {:<16} {} -> {}, latency {} -> {} ({})\n", c.link, format_bandwidth(c.bandwidth_before),
               format_bandwidth(c.bandwidth_after), format_seconds(c.latency_before), format_seconds(c.latency_after),
               c.why);
  for (const std::string& n : fit.notes) print_to(human, "note: {}\n", n);
  if (!a.out.empty() && a.out != "-") print_to(human, "wrote {}\n", a.out);
}

}  // namespace compass::cli
