#include "compass/cli/common.hpp"
#include "compass/cli/process.hpp"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <filesystem>

#include "compass/core/file_io.hpp"

#include "compass/hardware/profile_io.hpp"

namespace compass::cli {

namespace {

std::string stdout_failure(int err) {
  return fmt::format("writing to stdout failed: {}", err != 0 ? std::strerror(err) : "I/O error");
}

}  // namespace

void write_stdout(std::string_view text) {
  errno = 0;
  if (std::fwrite(text.data(), 1, text.size(), stdout) != text.size() || std::ferror(stdout))
    throw StdoutError(stdout_failure(errno));
}

bool try_write_stderr(std::string_view text) noexcept {
  if (std::ferror(stderr)) return false;  // gone once: later text would arrive out of order
  return std::fwrite(text.data(), 1, text.size(), stderr) == text.size() &&
         std::fflush(stderr) == 0;
}

void write_stderr(std::string_view text) {
  if (!try_write_stderr(text)) throw StderrGone{};
}

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

std::string read_input_file(const std::string& path, std::uint64_t max_bytes) {
  return unwrap(read_regular_file(path, max_bytes));
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

CLI::Validator positive_tp() { return integer_in(1, std::numeric_limits<int>::max()); }

CLI::Validator nonempty_gpus() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        if (text.find_first_not_of(" \t") != std::string::npos) return {};
        return "empty list (name at least one GPU, e.g. 0,1)";
      },
      "LIST");
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

void add_layer_plan_flags(CLI::App* sub, LayerPlanFlags& f) {
  sub->add_option("--profile", f.profile, "Preset name or profile JSON file")->capture_default_str();
  sub->add_option("--model", f.model, "Built-in model name or model JSON file")
      ->capture_default_str();
  f.tp_option = sub->add_option("--tp", f.tp, "Tensor-parallel degree (default: 8, or the size "
                                              "of --gpus)")->transform(positive_tp());
  sub->add_option("--gpus", f.gpus, "GPU ordinals of the TP group, e.g. 0,1,4,5 (default 0..tp-1)")
      ->check(nonempty_gpus());
  add_integer_option(sub, "--seq", f.seq, "Sequence length", 1)->capture_default_str();
  add_integer_option(sub, "--mbs", f.mbs, "Micro-batch size", 1)->capture_default_str();
  sub->add_flag("--no-sp", f.no_sp, "Without sequence parallelism (GEMM + AllReduce)");
}

PlannedLayer plan_from_flags(const LayerPlanFlags& f, DType dtype,
                             const plan::ChoiceRefiner& refine) {
  return plan_from_flags(f, load_profile(f.profile), dtype, refine);
}

PlannedLayer plan_from_flags(const LayerPlanFlags& f, hardware::Profile profile, DType dtype,
                             const plan::ChoiceRefiner& refine) {
  const workload::ModelConfig model = unwrap(workload::resolve_model(f.model));
  const bool tp_given = f.tp_option != nullptr && f.tp_option->count() > 0;
  if (tp_given && f.tp <= 0) throw UsageError(fmt::format("--tp: must be positive, got {}", f.tp));
  std::vector<int> group;
  if (!f.gpus.empty()) {
    group = select_group(profile, tp_given ? f.tp : 0, f.gpus);
  } else if (f.tp > profile.gpu_count()) {
    throw UsageError(fmt::format("--tp {} exceeds the {} GPUs of '{}'", f.tp, profile.gpu_count(),
                                 profile.name));
  }
  workload::ParallelConfig pc;
  pc.tp = group.empty() ? f.tp : static_cast<int>(group.size());
  pc.seq = f.seq;
  pc.micro_batch = f.mbs;
  pc.sequence_parallel = !f.no_sp;
  pc.dtype = dtype;
  plan::LayerPlan lp = unwrap(plan::plan_layer(profile, model, pc, group, refine));
  return PlannedLayer{std::move(profile), std::move(lp)};
}

std::string format_seconds(double s) { return format_duration(s, 3); }

std::string format_bandwidth(double b) { return fmt::format("{:.1f} GB/s", b / 1e9); }

std::string format_bytes(double b) {
  if (b >= 1024.0 * 1024 * 1024) return fmt::format("{:.2f} GiB", b / (1024.0 * 1024 * 1024));
  if (b >= 1024.0 * 1024) return fmt::format("{:.2f} MiB", b / (1024.0 * 1024));
  if (b >= 1024.0) return fmt::format("{:.2f} KiB", b / 1024.0);
  return fmt::format("{:.0f} B", b);
}

void check_run_counts(int repeat, int warmup) {
  if (repeat < 1 || repeat > kMaxRuns)
    throw UsageError(fmt::format("--repeat: must be in 1..{}, got {}", kMaxRuns, repeat));
  if (warmup < 0 || warmup > kMaxRuns)
    throw UsageError(fmt::format("--warmup: must be in 0..{}, got {}", kMaxRuns, warmup));
}

Result<std::int64_t> parse_integer(std::string_view text, std::int64_t min, std::int64_t max) {
  const auto fail = [&] {
    return make_error("must be an integer in {}..{}, got '{}'", min, max, text);
  };
  std::size_t i = 0;
  const bool negative = !text.empty() && text[0] == '-';
  if (negative) i = 1;
  if (i == text.size()) return fail();
  // Accumulated as a negative number: its range holds INT64_MIN too.
  std::int64_t value = 0;
  for (; i < text.size(); ++i) {
    const char c = text[i];
    if (c < '0' || c > '9') return fail();
    const int digit = c - '0';
    if (value < (std::numeric_limits<std::int64_t>::min() + digit) / 10) return fail();
    value = value * 10 - digit;
  }
  if (!negative) {
    if (value == std::numeric_limits<std::int64_t>::min()) return fail();
    value = -value;
  }
  if (value < min || value > max) return fail();
  return value;
}

CLI::Validator integer_in(std::int64_t min, std::int64_t max) {
  return CLI::Validator(
      [min, max](std::string& text) -> std::string {
        const Result<std::int64_t> v = parse_integer(text, min, max);
        if (!v.ok()) return v.error().message;
        text = std::to_string(*v);
        return {};
      },
      fmt::format("INT in {}..{}", min, max));
}

CLI::Validator seconds_in(double max_s, bool zero_ok) {
  return CLI::Validator(
      [max_s, zero_ok](std::string& text) -> std::string {
        const std::string fail =
            fmt::format("must be a number of seconds {} {:.0f}, got '{}'",
                        zero_ok ? "from 0 to" : "above 0 and at most", max_s, text);
        double v = 0;
        std::size_t used = 0;
        const bool plain = !text.empty() && text.find_first_of(" \t\n") == std::string::npos;
        try {
          if (plain) v = std::stod(text, &used);
        } catch (const std::exception&) {
          used = 0;
        }
        if (!plain || used != text.size() || !std::isfinite(v) || v < 0 || (v == 0 && !zero_ok) ||
            v > max_s)
          return fail;
        text = fmt::format("{}", v);  // CLI11 converts the plain decimal form only
        return {};
      },
      "SECONDS");
}

CLI::Validator non_empty(const std::string& what) {
  return CLI::Validator(
      [what](std::string& v) { return v.empty() ? "empty " + what : std::string(); }, "");
}

CLI::Option* add_output_option(CLI::App* sub, const std::string& name, std::string& path,
                               const std::string& help) {
  return sub->add_option(name, path, help)->check(non_empty("file name"));
}

void check_outputs(const std::vector<OutputFile>& outputs, bool force) {
  namespace fs = std::filesystem;
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    const OutputFile& a = outputs[i];
    if (a.path.empty()) continue;
    for (std::size_t j = 0; j < i; ++j) {
      const OutputFile& b = outputs[j];
      if (b.path.empty()) continue;
      std::error_code ea, eb;
      const bool same = a.path == "-" || b.path == "-"
                            ? a.path == b.path
                            : fs::weakly_canonical(fs::absolute(a.path, ea), ea) ==
                                  fs::weakly_canonical(fs::absolute(b.path, eb), eb);
      if (same)
        throw UsageError(fmt::format("{} and {} both write to {}", b.flag, a.flag,
                                     a.path == "-" ? "stdout" : "'" + a.path + "'"));
    }
    if (a.path == "-") continue;
    std::error_code ec;
    if (!force && fs::is_regular_file(a.path, ec))
      throw UsageError(fmt::format("{}: '{}' exists (use --force to overwrite)", a.flag, a.path));
    if (Status s = check_output_path(a.path, force); !s.ok())
      throw UsageError(fmt::format("{}: {}", a.flag, s.error().message));
  }
}

bool writes_stdout(const std::vector<OutputFile>& outputs) {
  for (const OutputFile& o : outputs)
    if (o.path == "-") return true;
  return false;
}

void write_output(const OutputFile& out, const std::string& text, bool force) {
  if (out.path == "-") {
    errno = 0;
    if (std::fwrite(text.data(), 1, text.size(), stdout) != text.size() || std::fflush(stdout) != 0)
      throw StdoutError(fmt::format("{}: {}", out.flag, stdout_failure(errno)));
    return;
  }
  if (Status s = write_file_atomic(out.path, text, force); !s.ok())
    throw UsageError(fmt::format("{}: {}", out.flag, s.error().message));
}

void StagedOutputs::add(const OutputFile& out, std::string text, bool force) {
  if (out.path.empty()) return;
  if (out.path == "-") {
    staged_.push_back(Staged{out.flag, std::nullopt, std::move(text)});
    return;
  }
  Result<StagedFile> f = StagedFile::stage(out.path, text, force);
  if (!f.ok()) throw UsageError(fmt::format("{}: {}", out.flag, f.error().message));
  staged_.push_back(Staged{out.flag, std::move(f).value(), {}});
}

void StagedOutputs::commit() {
  // What can still fail goes first: devices (a full one), then stdout; renames last.
  for (Staged& s : staged_)
    if (s.file && s.file->in_place())
      if (Status st = s.file->commit(); !st.ok())
        throw UsageError(fmt::format("{}: {}", s.flag, st.error().message));
  for (Staged& s : staged_)
    if (!s.file) write_output(OutputFile{s.flag, "-"}, s.stdout_text, false);
  for (Staged& s : staged_)
    if (s.file && !s.file->in_place())
      if (Status st = s.file->commit(); !st.ok())
        throw UsageError(fmt::format("{}: {}", s.flag, st.error().message));
  staged_.clear();
}

void JsonOutput::add_to(CLI::App* sub, const std::string& what, Spelling spelling) {
  if (spelling == Spelling::flag_or_file) {
    json_opt_ = sub->add_option("--json", json_value_,
                                fmt::format("Print {} as JSON on stdout (and nothing else there); "
                                            "'--json FILE' is the older spelling of --json-out",
                                            what))
                    ->expected(0, 1);
  } else {
    json_opt_ = sub->add_flag("--json", json_flag_,
                              fmt::format("Print {} as JSON on stdout (and nothing else there)",
                                          what));
  }
  add_output_option(sub, "--json-out", json_out_,
                    fmt::format("Write {} as JSON to this file ('-': stdout, like --json)", what));
}

bool JsonOutput::to_stdout() const {
  return (json_opt_ != nullptr && json_opt_->count() > 0 &&
          (json_value_.empty() || json_value_ == "-")) ||
         json_out_ == "-";
}

std::string JsonOutput::file() const {
  if (!json_out_.empty() && json_out_ != "-") return json_out_;
  if (json_opt_ != nullptr && json_opt_->count() > 0 && !json_value_.empty() && json_value_ != "-")
    return json_value_;
  return "";
}

void JsonOutput::check_writable(bool force) const {
  check_outputs({{"--json-out", file()}}, force);
}

void JsonOutput::stage_text(StagedOutputs& outputs, std::string text, bool force) const {
  if (text.empty() || text.back() != '\n') text += '\n';
  if (to_stdout()) outputs.add(OutputFile{"--json", "-"}, text, force);
  if (!file().empty()) outputs.add(OutputFile{"--json-out", file()}, std::move(text), force);
}

void JsonOutput::stage(StagedOutputs& outputs, const nlohmann::json& j, bool force) const {
  stage_text(outputs, j.dump(2), force);
}

void JsonOutput::stage(StagedOutputs& outputs, const nlohmann::ordered_json& j, bool force) const {
  stage_text(outputs, j.dump(2), force);
}

void JsonOutput::emit_text(std::string text, bool force) const {
  StagedOutputs outputs;
  stage_text(outputs, std::move(text), force);
  outputs.commit();
}

void JsonOutput::emit(const nlohmann::json& j, bool force) const { emit_text(j.dump(2), force); }

void JsonOutput::emit(const nlohmann::ordered_json& j, bool force) const {
  emit_text(j.dump(2), force);
}

void add_force_flag(CLI::App* sub, bool& force, const std::string& what) {
  sub->add_flag("--force", force, fmt::format("Overwrite {} if they exist", what));
}

std::string python_with_matplotlib(const std::string& flag) {
  for (const char* candidate : {"python3", "/usr/bin/python3"})
    if (const Result<int> rc = run_program({candidate, "-c", "import matplotlib"}, /*quiet=*/true);
        rc.ok() && *rc == 0)
      return candidate;
  throw UsageError(fmt::format(
      "{} needs python3 with matplotlib (Debian: apt install python3-matplotlib)", flag));
}

std::string find_script(const std::string& name, const std::string& relative,
                        const std::string& flag) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (const char* d = std::getenv("COMPASS_TOOLS_DIR")) {
    const fs::path p = fs::path(d) / name;
    if (fs::exists(p, ec)) return p.string();
  }
  const fs::path exe_dir = fs::read_symlink("/proc/self/exe", ec).parent_path();
  fs::path dir = exe_dir;
  for (int i = 0; i < 4 && !dir.empty(); ++i, dir = dir.parent_path()) {
    const fs::path p = dir / relative;
    if (fs::exists(p, ec)) return p.string();
    if (dir == dir.parent_path()) break;
  }
  const fs::path installed = exe_dir.parent_path() / "share" / "compass" / name;
  if (fs::exists(installed, ec)) return installed.string();
  throw UsageError(fmt::format("{}: {} not found (set COMPASS_TOOLS_DIR)", flag, relative));
}

bool stderr_is_terminal() {
  // The C stream, not descriptor 2: the Python module points `stderr` at a stream of its own.
  const int fd = fileno(stderr);
  return fd >= 0 && isatty(fd) != 0;
}

void add_progress_flags(CLI::App* sub, ProgressFlags& flags) {
  sub->add_option("--progress", flags.mode,
                  "auto (a bar when stderr is a terminal), lines (one 'compass: progress: LABEL "
                  "DONE/TOTAL' line per step on stderr, for logs and programs) or none")
      ->check(CLI::IsMember({"auto", "lines", "none"}))
      ->capture_default_str();
  sub->add_flag("--quiet", flags.quiet, "No progress (the same as --progress none)");
}

ProgressBar::ProgressBar(std::string label, const ProgressFlags& flags)
    : label_(std::move(label)), mode_(Mode::none) {
  if (flags.quiet || flags.mode == "none") return;
  if (flags.mode == "lines")
    mode_ = Mode::lines;
  else if (stderr_is_terminal())
    mode_ = Mode::bar;
}

ProgressBar::~ProgressBar() { finish(); }

void ProgressBar::draw(const std::string& text) noexcept {
  // Progress never stops the work: when stderr refuses it, the bar stops drawing and run_app
  // exits with code 2 at the end (try_write_stderr remembers the failure).
  if (!try_write_stderr(text)) {
    mode_ = Mode::none;
    drawn_ = false;
  }
}

void ProgressBar::update(double fraction, std::size_t done, std::size_t total) {
  if (mode_ == Mode::none) return;
  fraction = std::clamp(fraction, 0.0, 1.0);
  const int permille = static_cast<int>(fraction * 1000);
  if (mode_ == Mode::lines) {
    // A line per step (or per whole percent without a total), never the same line twice.
    const int step = total > 0 ? static_cast<int>(std::min<std::size_t>(done, 1u << 30))
                               : permille / 10;
    if (step == last_permille_) return;
    last_permille_ = step;
    if (total > 0)
      draw(fmt::format("compass: progress: {} {}/{}\n", label_, done, total));
    else
      draw(fmt::format("compass: progress: {} {}%\n", label_, step));
    return;
  }
  if (permille == last_permille_) return;  // redraw only when the bar changes
  last_permille_ = permille;
  constexpr int kWidth = 30;
  const int n = static_cast<int>(fraction * kWidth);
  std::string counts = total > 0 ? fmt::format(" {}/{}", done, total) : "";
  drawn_ = true;
  draw(fmt::format("\r{} [{}{}] {:3.0f}%{}", label_, std::string(n, '#'),
                   std::string(kWidth - n, ' '), 100 * fraction, counts));
}

void ProgressBar::finish() {
  if (!drawn_) return;
  drawn_ = false;
  draw("\r\033[K");
}

}  // namespace compass::cli
