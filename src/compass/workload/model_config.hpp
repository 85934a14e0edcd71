#pragma once
// Transformer model configurations as data.

#include <cstdint>
#include <string>
#include <vector>

#include "compass/core/result.hpp"

namespace compass::workload {

struct ModelConfig {
  std::string name;          ///< e.g. "llama2-13b"
  std::int64_t hidden = 0;   ///< h
  std::int64_t ffn = 0;      ///< f (per branch for SwiGLU)
  int heads = 0;
  int kv_heads = 0;          ///< == heads without GQA
  int layers = 0;
  std::int64_t vocab = 0;
  bool swiglu = false;
  bool operator==(const ModelConfig&) const = default;

  std::int64_t head_dim() const { return hidden / heads; }
  /// Output features of the fused QKV projection: h + 2 * kv_heads * head_dim.
  std::int64_t qkv_out() const { return hidden + 2 * kv_heads * head_dim(); }
  /// Output features of FC1: f, or 2f (gate and up) with SwiGLU.
  std::int64_t fc1_out() const { return swiglu ? 2 * ffn : ffn; }
};

/// Built-in models: gpt3-2.7b, gpt3-6.7b, gpt3-13b, gpt3-175b, llama2-7b, llama2-13b,
/// llama2-70b, llama3-8b, llama3-70b, llama3-405b.
std::vector<ModelConfig> builtin_models();
/// A built-in model by name, or a JSON file path; the error lists the known names.
Result<ModelConfig> resolve_model(const std::string& name_or_path);
/// Parses and validates a model from JSON text.
Result<ModelConfig> model_from_json(const std::string& text, const std::string& origin);
std::string model_to_json(const ModelConfig& m);
/// Positive sizes, heads divide hidden, kv_heads divide heads.
Status validate(const ModelConfig& m);

}  // namespace compass::workload
