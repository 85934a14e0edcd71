#pragma once
// Shared pieces of the command-line verbs. Verbs report bad input by throwing UsageError;
// main() prints it as one line on stderr and exits with code 2.

#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "compass/core/format.hpp"
#include "compass/core/result.hpp"
#include "compass/hardware/profile.hpp"
#include "compass/plan/layer_plan.hpp"
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

/// Checks of the values given to --tp and --gpus, attached where the options are added: a
/// given --tp must be positive (0 never means "every GPU") and a given --gpus must name at
/// least one GPU (an empty list never means "the default group").
CLI::Validator positive_tp();
CLI::Validator nonempty_gpus();

/// The TP group: `gpus` when given (and its size must equal tp when tp > 0), else GPUs
/// 0..tp-1, else every GPU of the profile. Errors when tp exceeds the machine.
std::vector<int> select_group(const hardware::Profile& p, int tp, const std::string& gpus);

/// The flags that describe one layer plan (plan, export te): --profile, --model, --tp, --gpus,
/// --seq, --mbs, --no-sp.
struct LayerPlanFlags {
  std::string profile = "a6000x8";
  std::string model = "llama2-13b";
  int tp = 8;
  std::string gpus;
  std::int64_t seq = 4096;
  std::int64_t mbs = 1;
  bool no_sp = false;
  const CLI::Option* tp_option = nullptr;  ///< to tell an explicit --tp from the default
};
void add_layer_plan_flags(CLI::App* sub, LayerPlanFlags& f);

/// A layer plan with the machine it was planned on.
struct PlannedLayer {
  hardware::Profile profile;
  plan::LayerPlan plan;
};
/// Plans the layer the flags describe (`dtype` for the GEMMs). --gpus without --tp sets tp to
/// the group's size; with both, the sizes must agree.
PlannedLayer plan_from_flags(const LayerPlanFlags& f, DType dtype = DType::bf16,
                             const plan::ChoiceRefiner& refine = {});

/// Checks --repeat (1..kMaxRuns) and --warmup (0..kMaxRuns) of the verbs that time runs.
inline constexpr int kMaxRuns = 1000000;
void check_run_counts(int repeat, int warmup);

/// A CLI11 check that rejects an empty value ("<what>: empty ...").
CLI::Validator non_empty(const std::string& what);

/// Human formatting of seconds in the CLI's tables: format_duration with 3 decimals
/// ("12.3 us", "4.567 ms", "1.234 s").
std::string format_seconds(double s);
/// Human formatting of bytes/s ("25.0 GB/s").
std::string format_bandwidth(double bytes_per_s);
/// Human formatting of bytes ("1.00 GiB").
std::string format_bytes(double bytes);

/// The JSON output every verb with a JSON result shares. `--json` prints the verb's result as
/// JSON on stdout and nothing else goes to stdout; `--json-out FILE` writes the same JSON to a
/// file (never overwritten without the verb's --force) while stdout keeps the human output;
/// `--json-out -` means `--json`. Verbs that took `--json FILE` before --json-out existed
/// (sweep, validate) keep that spelling with Spelling::flag_or_file; everywhere else --json is a
/// plain flag, so it never swallows a positional argument that follows it.
class JsonOutput {
 public:
  enum class Spelling { flag, flag_or_file };
  /// Adds --json and --json-out to `sub`.
  void add_to(CLI::App* sub, const std::string& what = "the result",
              Spelling spelling = Spelling::flag);
  /// JSON goes to stdout (the human output is suppressed).
  bool to_stdout() const;
  /// The file to write, or "" for none.
  std::string file() const;
  bool any() const { return to_stdout() || !file().empty(); }
  /// Prints `j` on stdout and/or writes it to the file, as requested.
  void emit(const nlohmann::json& j, bool force) const;
  /// Same for an ordered document.
  void emit(const nlohmann::ordered_json& j, bool force) const;
  /// Same for a document already serialised (a trailing newline is added when missing).
  void emit_text(std::string text, bool force) const;
  /// Refuses early when the output file exists and `force` is false.
  void check_writable(bool force) const;

 private:
  std::string json_value_;
  std::string json_out_;
  bool json_flag_ = false;
  const CLI::Option* json_opt_ = nullptr;
};

/// Adds the --force flag ("overwrite <what> if it exists") shared by every verb that writes files.
void add_force_flag(CLI::App* sub, bool& force, const std::string& what = "output files");

/// An output file option: an empty name is rejected when the command line is parsed.
CLI::Option* add_output_option(CLI::App* sub, const std::string& name, std::string& path,
                               const std::string& help);

/// One output file of a verb: the flag that names it and the path ("" = not asked for,
/// "-" = stdout).
struct OutputFile {
  std::string flag;
  std::string path;
};

/// Checks every output before the verb does any work: no two outputs name the same file (or
/// both stdout), no existing file without `force`, no directory. Errors name the flag.
void check_outputs(const std::vector<OutputFile>& outputs, bool force);

/// True when one of the outputs is "-" (stdout): the human table then goes to stderr.
bool writes_stdout(const std::vector<OutputFile>& outputs);

/// Writes one output: "-" to stdout (checked), else atomically (core/file_io.hpp): a failed
/// write leaves no partial file and keeps the old one. Errors name the flag.
void write_output(const OutputFile& out, const std::string& text, bool force);

/// A python3 that can import matplotlib ("python3" on PATH, else /usr/bin/python3); throws
/// UsageError naming `flag` when there is none.
std::string python_with_matplotlib(const std::string& flag);

/// A script shipped with Compass: $COMPASS_TOOLS_DIR/<name>, else <relative> found walking up
/// from the binary's directory (the source tree around a build), else the binary's
/// ../share/compass/<name> (an installation). Throws UsageError naming `flag` when missing.
std::string find_script(const std::string& name, const std::string& relative,
                        const std::string& flag);

/// True when stderr is a terminal (for progress indicators).
bool stderr_is_terminal();

/// How long work reports progress on stderr: `--progress auto|lines|none` and `--quiet`.
struct ProgressFlags {
  std::string mode = "auto";  ///< auto: a bar when stderr is a terminal; lines; none
  bool quiet = false;         ///< the same as --progress none
};

/// Adds --progress and --quiet to a verb.
void add_progress_flags(CLI::App* sub, ProgressFlags& flags);

/// Progress on stderr. auto: a one-line bar ("label [#####     ]  50% 3/6") drawn only when
/// stderr is a terminal, cleared when the work is done. lines: one line per step whatever
/// stderr is, "compass: progress: LABEL DONE/TOTAL" (or "LABEL PERCENT%" when the total is not
/// known), for logs and for programs that follow the work (the Python package does). (No
/// maintained terminal-progress library is packaged for Debian 12, so this is our own, in one
/// place.)
class ProgressBar {
 public:
  ProgressBar(std::string label, const ProgressFlags& flags);
  ~ProgressBar();
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;
  bool enabled() const { return mode_ != Mode::none; }
  /// Reports `fraction` (0..1) of the work, with "done/total" when total > 0.
  void update(double fraction, std::size_t done = 0, std::size_t total = 0);
  /// Clears the bar (also done by the destructor).
  void finish();

 private:
  enum class Mode { none, bar, lines };
  std::string label_;
  Mode mode_;
  bool drawn_ = false;
  int last_permille_ = -1;  ///< bar: the last permille drawn; lines: the last step printed
};

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
void add_export_verb(CLI::App& app);
void add_plot_verb(CLI::App& app);
void add_search_verb(CLI::App& app);

}  // namespace compass::cli
