// compass list presets|models [--json]: what is built into the binary.

#include <fmt/format.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "compass/cli/common.hpp"
#include "compass/hardware/presets.hpp"
#include "compass/workload/model_config.hpp"

namespace compass::cli {

namespace {

struct ListOptions {
  std::string kind;
  JsonOutput json;
  bool force = false;
};

void list_presets(const ListOptions& o) {
  const auto names = hardware::preset_names();
  if (o.json.any()) {
    nlohmann::ordered_json out = nlohmann::ordered_json::array();
    for (const std::string& name : names) {
      const hardware::Profile p = unwrap(hardware::make_preset(name));
      out.push_back({{"name", name}, {"gpus", p.gpu_count()}, {"description", p.description}});
    }
    o.json.emit(out, o.force);
    if (o.json.to_stdout()) return;
  }
  out("{:<10} {:>4}  {}\n", "PRESET", "GPUS", "DESCRIPTION");
  for (const std::string& name : names) {
    const hardware::Profile p = unwrap(hardware::make_preset(name));
    out("{:<10} {:>4}  {}\n", name, p.gpu_count(), p.description);
  }
}

void list_models(const ListOptions& o) {
  const auto models = workload::builtin_models();
  if (o.json.any()) {
    nlohmann::ordered_json out = nlohmann::ordered_json::array();
    for (const workload::ModelConfig& m : models)
      out.push_back({{"name", m.name},
                     {"hidden", m.hidden},
                     {"ffn", m.ffn},
                     {"heads", m.heads},
                     {"kv_heads", m.kv_heads},
                     {"layers", m.layers},
                     {"vocab", m.vocab},
                     {"swiglu", m.swiglu}});
    o.json.emit(out, o.force);
    if (o.json.to_stdout()) return;
  }
  out("{:<12} {:>6} {:>6} {:>5} {:>8} {:>6} {:>7}  {}\n", "MODEL", "HIDDEN", "FFN", "HEADS",
             "KV_HEADS", "LAYERS", "VOCAB", "SWIGLU");
  for (const workload::ModelConfig& m : models)
    out("{:<12} {:>6} {:>6} {:>5} {:>8} {:>6} {:>7}  {}\n", m.name, m.hidden, m.ffn, m.heads,
               m.kv_heads, m.layers, m.vocab, m.swiglu ? "yes" : "no");
}

}  // namespace

void add_list_verb(CLI::App& app) {
  auto opts = std::make_shared<ListOptions>();
  auto* sub = app.add_subcommand("list", "List the built-in machine presets or model configs");
  sub->add_option("kind", opts->kind, "What to list: presets or models")->required();
  opts->json.add_to(sub, "the list");
  add_force_flag(sub, opts->force, "--json-out");
  sub->callback([opts] {
    if (opts->kind == "presets") {
      list_presets(*opts);
    } else if (opts->kind == "models") {
      list_models(*opts);
    } else {
      throw UsageError(
          fmt::format("unknown list kind '{}' (expected 'presets' or 'models')", opts->kind));
    }
  });
}

}  // namespace compass::cli
