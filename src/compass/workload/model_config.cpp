// Built-in transformer configurations and their JSON form.

#include "compass/workload/model_config.hpp"

#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "compass/core/json_text.hpp"

namespace compass::workload {

namespace {

ModelConfig make(std::string name, std::int64_t hidden, std::int64_t ffn, int heads, int kv_heads,
                 int layers, std::int64_t vocab, bool swiglu) {
  return ModelConfig{std::move(name), hidden, ffn, heads, kv_heads, layers, vocab, swiglu};
}

std::string known_names() {
  std::string out;
  for (const auto& m : builtin_models()) {
    if (!out.empty()) out += ", ";
    out += m.name;
  }
  return out;
}

}  // namespace

std::vector<ModelConfig> builtin_models() {
  // Sources are listed in docs/workload.md. GPT-3 sizes follow Brown et al. 2020, table 2.1
  // (d_ff = 4 d_model); the GPT-2 BPE vocabulary has 50257 tokens. Llama values are the
  // published Hugging Face config.json of each checkpoint.
  return {
      make("gpt3-2.7b", 2560, 10240, 32, 32, 32, 50257, false),
      make("gpt3-6.7b", 4096, 16384, 32, 32, 32, 50257, false),
      make("gpt3-13b", 5120, 20480, 40, 40, 40, 50257, false),
      make("gpt3-175b", 12288, 49152, 96, 96, 96, 50257, false),
      make("llama2-7b", 4096, 11008, 32, 32, 32, 32000, true),
      make("llama2-13b", 5120, 13824, 40, 40, 40, 32000, true),
      make("llama2-70b", 8192, 28672, 64, 8, 80, 32000, true),
      make("llama3-8b", 4096, 14336, 32, 8, 32, 128256, true),
      make("llama3-70b", 8192, 28672, 64, 8, 80, 128256, true),
      make("llama3-405b", 16384, 53248, 128, 8, 126, 128256, true),
  };
}

Status validate(const ModelConfig& m) {
  const std::string who = m.name.empty() ? std::string("model") : "model '" + m.name + "'";
  if (m.name.empty()) return make_error("model: field 'name' must not be empty");
  for (unsigned char ch : m.name)
    if (ch < 0x20 || ch == 0x7f)
      return make_error("model: field 'name' contains a control character (0x{:02x})", ch);
  if (m.hidden <= 0) return make_error("{}: hidden={} must be positive", who, m.hidden);
  if (m.ffn <= 0) return make_error("{}: ffn={} must be positive", who, m.ffn);
  if (m.heads <= 0) return make_error("{}: heads={} must be positive", who, m.heads);
  if (m.kv_heads <= 0) return make_error("{}: kv_heads={} must be positive", who, m.kv_heads);
  if (m.layers <= 0) return make_error("{}: layers={} must be positive", who, m.layers);
  if (m.vocab <= 0) return make_error("{}: vocab={} must be positive", who, m.vocab);
  if (m.hidden % m.heads != 0) {
    return make_error("{}: hidden={} is not divisible by heads={}", who, m.hidden, m.heads);
  }
  if (m.heads % m.kv_heads != 0) {
    return make_error("{}: heads={} is not divisible by kv_heads={}", who, m.heads, m.kv_heads);
  }
  return Status::success();
}

Result<ModelConfig> model_from_json(const std::string& text, const std::string& origin) {
  COMPASS_ASSIGN(const nlohmann::json j, parse_json_text(text, origin));
  if (!j.is_object()) return make_error("{}: a model must be a JSON object", origin);

  static const char* const kKnown[] = {"name",     "hidden", "ffn",   "heads",
                                       "kv_heads", "layers", "vocab", "swiglu"};
  for (auto it = j.begin(); it != j.end(); ++it) {
    bool known = false;
    for (const char* k : kKnown) known = known || it.key() == k;
    if (!known) return make_error("{}: unknown field '{}'", origin, it.key());
  }

  ModelConfig m;
  auto need = [&](const char* field) -> Status {
    if (!j.contains(field)) return make_error("{}: missing field '{}'", origin, field);
    return Status::success();
  };
  // Integers must be JSON integers that fit the field; floats and strings are rejected.
  auto get_int = [&](const char* field, std::int64_t max, std::int64_t& out) -> Status {
    const auto& v = j.at(field);
    if (!v.is_number_integer()) {
      return make_error("{}: field '{}' must be an integer, got {}", origin, field, v.dump());
    }
    const std::optional<std::int64_t> x =
        json_integer(v, std::numeric_limits<std::int64_t>::min(), max);
    if (!x) return make_error("{}: field '{}' = {} is too large", origin, field, v.dump());
    if (*x <= 0) return make_error("{}: field '{}' = {} must be positive", origin, field, *x);
    out = *x;
    return Status::success();
  };

  COMPASS_TRY(need("name"));
  if (!j.at("name").is_string() || j.at("name").get<std::string>().empty()) {
    return make_error("{}: field 'name' must be a non-empty string", origin);
  }
  m.name = j.at("name").get<std::string>();

  constexpr std::int64_t kMaxDim = std::int64_t{1} << 32;
  constexpr std::int64_t kMaxCount = std::int64_t{1} << 20;
  std::int64_t v = 0;
  COMPASS_TRY(need("hidden"));
  COMPASS_TRY(get_int("hidden", kMaxDim, m.hidden));
  COMPASS_TRY(need("ffn"));
  COMPASS_TRY(get_int("ffn", kMaxDim, m.ffn));
  COMPASS_TRY(need("heads"));
  COMPASS_TRY(get_int("heads", kMaxCount, v));
  m.heads = static_cast<int>(v);
  if (j.contains("kv_heads")) {
    COMPASS_TRY(get_int("kv_heads", kMaxCount, v));
    m.kv_heads = static_cast<int>(v);
  } else {
    m.kv_heads = m.heads;
  }
  COMPASS_TRY(need("layers"));
  COMPASS_TRY(get_int("layers", kMaxCount, v));
  m.layers = static_cast<int>(v);
  COMPASS_TRY(need("vocab"));
  COMPASS_TRY(get_int("vocab", kMaxDim, m.vocab));
  if (j.contains("swiglu")) {
    if (!j.at("swiglu").is_boolean()) {
      return make_error("{}: field 'swiglu' must be true or false", origin);
    }
    m.swiglu = j.at("swiglu").get<bool>();
  }

  const Status s = validate(m);
  if (!s.ok()) return make_error("{}: {}", origin, s.error().message);
  return m;
}

std::string model_to_json(const ModelConfig& m) {
  // ordered_json keeps the documented field order so files diff cleanly.
  nlohmann::ordered_json j;
  j["name"] = m.name;
  j["hidden"] = m.hidden;
  j["ffn"] = m.ffn;
  j["heads"] = m.heads;
  j["kv_heads"] = m.kv_heads;
  j["layers"] = m.layers;
  j["vocab"] = m.vocab;
  j["swiglu"] = m.swiglu;
  return j.dump(2) + "\n";
}

Result<ModelConfig> resolve_model(const std::string& name_or_path) {
  for (auto& m : builtin_models()) {
    if (m.name == name_or_path) return m;
  }
  namespace fs = std::filesystem;
  std::error_code ec;
  const bool looks_like_path =
      name_or_path.find('/') != std::string::npos || name_or_path.ends_with(".json");
  if (!name_or_path.empty() && fs::exists(name_or_path, ec)) {
    if (fs::is_directory(name_or_path, ec))
      return make_error("{}: is a directory, not a model file", name_or_path);
    if (!fs::is_regular_file(name_or_path, ec))
      return make_error("{}: not a regular file", name_or_path);
    constexpr std::uintmax_t kMaxModelFileBytes = std::uintmax_t{1} << 20;
    const auto size = fs::file_size(name_or_path, ec);
    if (ec) return make_error("{}: cannot read model file: {}", name_or_path, ec.message());
    if (size > kMaxModelFileBytes)
      return make_error("{}: model file too large ({} bytes, the limit is {})", name_or_path, size,
                        kMaxModelFileBytes);
    std::ifstream in(name_or_path, std::ios::binary);
    if (!in) return make_error("{}: cannot read model file", name_or_path);
    std::ostringstream ss;
    ss << in.rdbuf();
    if (in.bad()) return make_error("{}: cannot read model file", name_or_path);
    return model_from_json(ss.str(), name_or_path);
  }
  if (looks_like_path) return make_error("{}: model file not found", name_or_path);
  return make_error("unknown model '{}' (known: {}; or a JSON file path)", name_or_path,
                    known_names());
}

}  // namespace compass::workload
