#pragma once
// Shared pieces of the command-line verbs. Verbs report bad input by throwing UsageError;
// main() prints it as one line on stderr and exits with code 2.

#include <algorithm>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <cstdio>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "compass/core/file_io.hpp"
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

/// stdout could not be written (closed, full, a broken device): run_app reports it on stderr
/// and exits with code 2.
class StdoutError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// stderr could not be written: nothing can be reported, so run_app exits with code 2 quietly.
struct StderrGone {};

/// The one way the CLI writes to its standard streams (every verb prints through these).
/// write_stdout throws StdoutError and write_stderr throws StderrGone when the stream refuses a
/// byte; stdout's buffer is checked again when run_app ends.
void write_stdout(std::string_view text);
void write_stderr(std::string_view text);
/// The same for stderr without throwing (progress, and messages while an error is reported):
/// false when it failed. A failure is remembered and makes run_app exit with code 2.
bool try_write_stderr(std::string_view text) noexcept;

/// fmt-formatted text on stdout (checked, see write_stdout).
template <typename... T>
void out(fmt::format_string<T...> f, T&&... args) {
  write_stdout(fmt::format(f, std::forward<T>(args)...));
}
/// fmt-formatted text on stderr (checked, see write_stderr).
template <typename... T>
void err(fmt::format_string<T...> f, T&&... args) {
  write_stderr(fmt::format(f, std::forward<T>(args)...));
}

/// out() when `stream` is stdout, else err() (a human table goes to stderr when stdout carries
/// machine output).
template <typename... T>
void print_to(std::FILE* stream, fmt::format_string<T...> f, T&&... args) {
  const std::string text = fmt::format(f, std::forward<T>(args)...);
  if (stream == stdout)
    write_stdout(text);
  else
    write_stderr(text);
}

/// The value of a Result, or throws UsageError with its message.
template <typename T>
T unwrap(Result<T> r) {
  if (!r.ok()) throw UsageError(r.error().message);
  return std::move(r).value();
}
inline void unwrap(const Status& s) {
  if (!s.ok()) throw UsageError(s.error().message);
}

/// The text of an input file (read_regular_file: a regular file of at most `max_bytes`, never
/// a FIFO or a device), or throws UsageError naming it.
std::string read_input_file(const std::string& path, std::uint64_t max_bytes);

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
/// given --tp must be a positive integer (integer_in; 0 never means "every GPU"; attach it with
/// ->transform()) and a given --gpus must name at least one GPU (an empty list never means
/// "the default group").
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
/// The same on `profile` instead of the one --profile names.
PlannedLayer plan_from_flags(const LayerPlanFlags& f, hardware::Profile profile,
                             DType dtype = DType::bf16, const plan::ChoiceRefiner& refine = {});

/// Most planning workers a --threads flag takes.
inline constexpr int kMaxThreads = 1024;

/// Checks --repeat (1..kMaxRuns) and --warmup (0..kMaxRuns) of the verbs that time runs.
inline constexpr int kMaxRuns = 1000000;
void check_run_counts(int repeat, int warmup);

/// The one parser of the CLI's integer flags: an optional '-' and decimal digits (nothing else,
/// no spaces, no "0x", no exponent), within [min, max]. The error states the range and echoes
/// the text as typed: "must be an integer in 1..2147483647, got '2147483648'".
Result<std::int64_t> parse_integer(std::string_view text, std::int64_t min, std::int64_t max);

/// A CLI11 check with parse_integer, attached with ->transform() (->check() gives it a copy): it
/// rewrites the value in plain decimal, so CLI11's own conversion (which saturates on overflow
/// and reads "010" as octal) only sees valid numbers.
CLI::Validator integer_in(std::int64_t min, std::int64_t max);

/// Adds an integer flag checked by integer_in(min, max), the range clipped to T's.
template <typename T>
CLI::Option* add_integer_option(CLI::App* sub, const std::string& name, T& value,
                                const std::string& help, std::int64_t min,
                                std::int64_t max = std::numeric_limits<std::int64_t>::max()) {
  static_assert(std::is_integral_v<T> && std::is_signed_v<T>);
  min = std::max<std::int64_t>(min, std::numeric_limits<T>::min());
  max = std::min<std::int64_t>(max, std::numeric_limits<T>::max());
  return sub->add_option(name, value, help)->transform(integer_in(min, max));
}

/// The longest time a time flag accepts (seconds; about 11.6 days): larger values would overflow
/// the clocks' integer durations.
inline constexpr double kMaxFlagSeconds = 1e6;

/// A CLI11 check of a time flag, attached with ->transform(): a finite number of seconds in
/// 0..max_s (0 itself only with `zero_ok`); the error states the range and echoes the text as
/// typed.
CLI::Validator seconds_in(double max_s, bool zero_ok);

/// A CLI11 check that rejects an empty value ("<what>: empty ...").
CLI::Validator non_empty(const std::string& what);

/// Human formatting of seconds in the CLI's tables: format_duration with 3 decimals
/// ("12.3 us", "4.567 ms", "1.234 s").
std::string format_seconds(double s);
/// Human formatting of bytes/s ("25.0 GB/s").
std::string format_bandwidth(double bytes_per_s);
/// Human formatting of bytes ("1.00 GiB").
std::string format_bytes(double bytes);

class StagedOutputs;

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
  /// Stages the JSON into `outputs` instead (see StagedOutputs), for commands with other
  /// outputs: they are then written all or none.
  void stage(StagedOutputs& outputs, const nlohmann::json& j, bool force) const;
  void stage(StagedOutputs& outputs, const nlohmann::ordered_json& j, bool force) const;
  void stage_text(StagedOutputs& outputs, std::string text, bool force) const;
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

/// The outputs of one command, written all or none. add() stages each one (a file is written to
/// a temporary file beside it and checked, so a full disk or a missing permission fails here);
/// commit() then writes devices and FIFOs in place, then stdout, then renames the staged files
/// into place. A failure before commit() leaves every output untouched; the destructor removes
/// what was staged and not committed.
class StagedOutputs {
 public:
  /// Stages `text` for `out` (nothing when its path is empty); errors name the flag.
  void add(const OutputFile& out, std::string text, bool force);
  /// Writes everything staged, in the order above; errors name the flag.
  void commit();

 private:
  struct Staged {
    std::string flag;
    std::optional<StagedFile> file;  ///< none for stdout
    std::string stdout_text;
  };
  std::vector<Staged> staged_;
};

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
  void draw(const std::string& text) noexcept;
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
