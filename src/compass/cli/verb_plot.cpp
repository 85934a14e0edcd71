// compass plot DATA.json --out F.png [--force] [--json]: draws a result with matplotlib —
// `compass plan --json` as per-operator stacked bars (GEMM, exposed communication, overheads)
// for Megatron-LM / TE defaults / Compass, `compass sweep --json` as per-strategy speedup
// distributions, `compass simulate --trace` as a timeline per rank and resource. The drawing is
// python/tpcompass/plots.py, run as a child process with an argument vector (no shell).

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "compass/cli/common.hpp"
#include "compass/cli/process.hpp"
#include "compass/core/json_text.hpp"

namespace compass::cli {

namespace {

namespace fs = std::filesystem;

struct PlotOptions {
  std::string data;
  std::string out;
  bool force = false;
  JsonOutput json;
};

constexpr std::uint64_t kMaxDataBytes = std::uint64_t{1} << 30;  // the plotted JSON

// The kind plots.py will draw (the same recognition rules), or a UsageError.
std::string kind_of(const std::string& path, const std::string& text) {
  const nlohmann::json j = unwrap(parse_json_text(text, path));
  if (j.is_object() && j.contains("ops") && j.contains("iteration")) return "plan";
  if (j.is_object() && j.contains("rows") && j.contains("summary")) return "sweep";
  if (j.is_object() && j.contains("traceEvents")) return "timeline";
  throw UsageError(fmt::format(
      "{}: not a plan, sweep or simulation trace (compass plan --json, compass sweep --json, "
      "compass simulate --trace)",
      path));
}

void run(const PlotOptions& o) {
  // Read without waiting (a FIFO or a device is refused, never blocks); the script draws this
  // copy, so it reads exactly what was checked.
  const std::string text = read_input_file(o.data, kMaxDataBytes);
  const std::string kind = kind_of(o.data, text);
  check_outputs({{"--out", o.out}, {"--json-out", o.json.file()}}, o.force);
  const std::string script = find_script("plots.py", "python/tpcompass/plots.py", "plot");
  const std::string python = python_with_matplotlib("plot");
  // The script draws into a private directory; the PNG then reaches --out atomically.
  const PrivateTempDir dir = unwrap(PrivateTempDir::create());
  const std::string png = dir.path() + "/plot" + fs::path(o.out).extension().string();
  const std::string data = unwrap(dir.write("data.json", text));
  const int rc = unwrap(run_program({python, script, data, png}, /*quiet=*/true));
  if (rc != 0) throw UsageError(fmt::format("plot: {} {} failed (exit {})", python, script, rc));
  std::ifstream in(png, std::ios::binary);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  if (!in || bytes.str().empty()) throw UsageError(fmt::format("plot: {} was not written", o.out));
  // The image and the JSON are written together or not at all.
  StagedOutputs outputs;
  outputs.add(OutputFile{"--out", o.out}, bytes.str(), o.force);
  if (o.json.any())
    o.json.stage(outputs,
                 nlohmann::json{{"out", o.out}, {"kind", kind}, {"bytes", bytes.str().size()}},
                 o.force);
  outputs.commit();
  if (!o.json.to_stdout()) out("wrote {} ({})\n", o.out, kind);
}

}  // namespace

void add_plot_verb(CLI::App& app) {
  auto opts = std::make_shared<PlotOptions>();
  auto* sub = app.add_subcommand(
      "plot", "Draw a plan, a sweep or a simulation trace (JSON) as a PNG with matplotlib");
  sub->add_option("data", opts->data,
                  "compass plan --json, compass sweep --json or compass simulate --trace output")
      ->required();
  sub->add_option("--out", opts->out, "Image file to write (.png, .pdf, .svg)")->required();
  sub->add_flag("--force", opts->force, "Overwrite --out (and --json-out) if it exists");
  opts->json.add_to(sub, "what was drawn (file, kind, size)");
  sub->callback([opts] { run(*opts); });
}

}  // namespace compass::cli
