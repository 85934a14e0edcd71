#pragma once
// Shared pieces of the command-line verbs. Verbs report bad input by throwing UsageError;
// main() prints it as one line on stderr and exits with code 2.

#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "compass/core/format.hpp"
#include "compass/core/result.hpp"
#include "compass/hardware/profile.hpp"
#include "compass/workload/operator.hpp"

namespace compass::cli {

/// Bad input detected by a verb; printed as "compass: error: <message>", exit code 2.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Ends a verb with a non-zero exit code after its output is complete (e.g. a failed
/// --check: exit 1). main() returns `code` without printing anything more.
struct ExitCode {
  int code = 1;
};

/// The value of a Result, or throws UsageError with its message.
template <typename T>
T unwrap(Result<T> r) {
  if (!r.ok()) throw UsageError(r.error().message);
  return std::move(r).value();
}
inline void unwrap(const Status& s) {
  if (!s.ok()) throw UsageError(s.error().message);
}

/// Loads `--profile` (a preset name or a JSON file).
hardware::Profile load_profile(const std::string& preset_or_path);

/// The operator given by --op, --m, --n, --k, --tp and --dtype; the error names the flag.
/// Divisibility is left to workload::validate.
workload::OperatorSpec operator_from_flags(const std::string& op, std::int64_t m, std::int64_t n,
                                           std::int64_t k, int tp, const std::string& dtype);

/// The preset or file of "--links emulated:<preset|file>".
std::string parse_links_option(const std::string& text);

/// "--link-scale": a positive number, or nullopt for "auto".
std::optional<double> parse_link_scale(const std::string& text);

/// Parses "0,1,2,3" into GPU ordinals; the error names the bad item.
std::vector<int> parse_gpu_list(const std::string& text);

/// The TP group: `gpus` when given (and its size must equal tp when tp > 0), else GPUs
/// 0..tp-1, else every GPU of the profile. Errors when tp exceeds the machine.
std::vector<int> select_group(const hardware::Profile& p, int tp, const std::string& gpus);

/// Human formatting of seconds in the CLI's tables: format_duration with 3 decimals
/// ("12.3 us", "4.567 ms", "1.234 s").
std::string format_seconds(double s);
/// Human formatting of bytes/s ("25.0 GB/s").
std::string format_bandwidth(double bytes_per_s);
/// Human formatting of bytes ("1.00 GiB").
std::string format_bytes(double bytes);

/// Writes text to a file; refuses to overwrite an existing file unless `overwrite`.
void write_file(const std::string& path, const std::string& text, bool overwrite);

/// True when stderr is a terminal (for progress indicators).
bool stderr_is_terminal();

// Verb registration: each adds one subcommand to the app (one file per verb).
void add_list_verb(CLI::App& app);
void add_topo_verb(CLI::App& app);
void add_schedule_verb(CLI::App& app);
void add_run_verb(CLI::App& app);
void add_op_verb(CLI::App& app);
void add_plan_verb(CLI::App& app);
void add_sweep_verb(CLI::App& app);
void add_simulate_verb(CLI::App& app);
void add_calibrate_verb(CLI::App& app);
void add_validate_verb(CLI::App& app);
void add_profile_verb(CLI::App& app);
void add_discover_verb(CLI::App& app);
void add_doctor_verb(CLI::App& app);

}  // namespace compass::cli
