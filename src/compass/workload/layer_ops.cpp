// The TP operators of one transformer layer (Megatron-LM tensor parallelism) and the paper grid.

#include "compass/workload/layer_ops.hpp"

#include <array>

namespace compass::workload {

namespace {

OperatorSpec make_op(OpKind kind, std::int64_t m, std::int64_t n, std::int64_t k,
                     const ParallelConfig& pc, std::string role) {
  OperatorSpec op;
  op.kind = kind;
  op.m = m;
  op.n = n;
  op.k = k;
  op.tp = pc.tp;
  op.dtype = pc.dtype;
  op.role = std::move(role);
  return op;
}

// Megatron-LM splits attention heads, query groups (kv heads) and the FFN across TP ranks, so
// each of these must divide by tp before any operator shape is considered.
Status check_model_split(const ModelConfig& m, int tp) {
  auto check = [&](const char* what, std::int64_t v) -> Status {
    if (v % tp != 0) {
      return make_error("model '{}': {}={} is not divisible by tp={}", m.name, what, v, tp);
    }
    return Status::success();
  };
  COMPASS_TRY(check("heads", m.heads));
  COMPASS_TRY(check("kv_heads", m.kv_heads));
  COMPASS_TRY(check("hidden", m.hidden));
  COMPASS_TRY(check("ffn", m.ffn));
  return Status::success();
}

}  // namespace

Status check_context_split(std::int64_t seq, int cp) {
  if (cp > 1 && seq % (2 * std::int64_t{cp}) != 0)
    return make_error(
        "sequence {} is not a multiple of 2 x CP = {} (Megatron-LM splits each sequence into 2 x "
        "CP chunks)",
        seq, 2 * std::int64_t{cp});
  return Status::success();
}

Result<std::vector<LayerOp>> layer_operators(const ModelConfig& m, const ParallelConfig& pc) {
  COMPASS_TRY(validate(m));
  if (pc.tp < 1) return make_error("tp={} must be at least 1", pc.tp);
  if (pc.seq <= 0) return make_error("seq={} must be positive", pc.seq);
  if (pc.micro_batch <= 0) return make_error("micro_batch={} must be positive", pc.micro_batch);
  if (pc.seq > (std::int64_t{1} << 31) / pc.micro_batch) {
    return make_error("seq={} x micro_batch={} tokens is too large", pc.seq, pc.micro_batch);
  }
  COMPASS_TRY(check_model_split(m, pc.tp));

  const std::int64_t tokens = pc.seq * pc.micro_batch;
  if (pc.sequence_parallel && tokens % pc.tp != 0) {
    return make_error(
        "model '{}': tokens M = seq {} x micro_batch {} = {} is not divisible by tp={} "
        "(sequence parallelism shards tokens)",
        m.name, pc.seq, pc.micro_batch, tokens, pc.tp);
  }

  const std::int64_t h = m.hidden;
  const std::int64_t f = m.ffn;
  const std::int64_t qkv = m.qkv_out();
  const std::int64_t fc1 = m.fc1_out();
  std::vector<LayerOp> ops;
  auto fwd = [&](OperatorSpec op) { ops.push_back(LayerOp{std::move(op), Pass::forward}); };
  auto bwd = [&](OperatorSpec op) { ops.push_back(LayerOp{std::move(op), Pass::backward}); };

  if (pc.sequence_parallel) {
    // Forward, in execution order.
    fwd(make_op(OpKind::ag_gemm, tokens, qkv, h, pc, "qkv_fprop"));
    fwd(make_op(OpKind::gemm_rs, tokens, h, h, pc, "proj_fprop"));
    fwd(make_op(OpKind::ag_gemm, tokens, fc1, h, pc, "fc1_fprop"));
    fwd(make_op(OpKind::gemm_rs, tokens, h, f, pc, "fc2_fprop"));
    // Backward, in execution order (last layer first). Data gradients: dX = dY * W^T, so a
    // column-parallel layer's dgrad is row-parallel (GEMM -> ReduceScatter) and vice versa.
    // The wgrad entries stand for the all-gather of X beside a GEMM of the same FLOPs; the
    // real wgrad GEMM contracts over M (docs/workload.md). proj_wgrad and fc2_wgrad reuse
    // the dY gathered by their dgrad and the local X_r, so they carry no collective.
    bwd(make_op(OpKind::ag_gemm, tokens, f, h, pc, "fc2_dgrad"));
    bwd(make_op(OpKind::gemm_rs, tokens, h, fc1, pc, "fc1_dgrad"));
    bwd(make_op(OpKind::ag_gemm, tokens, fc1, h, pc, "fc1_wgrad"));
    bwd(make_op(OpKind::ag_gemm, tokens, h, h, pc, "proj_dgrad"));
    bwd(make_op(OpKind::gemm_rs, tokens, h, qkv, pc, "qkv_dgrad"));
    bwd(make_op(OpKind::ag_gemm, tokens, qkv, h, pc, "qkv_wgrad"));
  } else {
    // Without SP activations are replicated: column-parallel forwards and row-parallel
    // dgrads need no collective, and weight gradients use the local full input.
    fwd(make_op(OpKind::gemm_ar, tokens, h, h, pc, "proj_fprop"));
    fwd(make_op(OpKind::gemm_ar, tokens, h, f, pc, "fc2_fprop"));
    bwd(make_op(OpKind::gemm_ar, tokens, h, fc1, pc, "fc1_dgrad"));
    bwd(make_op(OpKind::gemm_ar, tokens, h, qkv, pc, "qkv_dgrad"));
  }

  for (const auto& lo : ops) {
    const Status s = validate(lo.op);
    if (!s.ok()) {
      return make_error("model '{}', {}: {}", m.name, lo.op.role, s.error().message);
    }
  }
  return ops;
}

std::vector<GridEntry> paper_grid() {
  static constexpr std::array<const char*, 6> kModels = {"gpt3-2.7b", "gpt3-6.7b",  "gpt3-13b",
                                                         "llama2-7b", "llama2-13b", "llama2-70b"};
  static constexpr std::array<const char*, 4> kLayers = {"qkv", "fc1", "proj", "fc2"};
  static constexpr std::array<int, 3> kTp = {2, 4, 8};
  static constexpr std::array<std::int64_t, 4> kTokens = {2048, 4096, 8192, 16384};

  std::vector<GridEntry> grid;
  grid.reserve(kModels.size() * kLayers.size() * kTp.size() * kTokens.size());
  for (const char* name : kModels) {
    const Result<ModelConfig> model = resolve_model(name);
    COMPASS_CHECK(model.ok(), "paper grid model {} is not built in", name);
    const ModelConfig& m = *model;
    for (const std::string layer : kLayers) {
      for (int tp : kTp) {
        for (std::int64_t tokens : kTokens) {
          OperatorSpec op;
          op.m = tokens;
          op.tp = tp;
          op.dtype = DType::bf16;
          op.role = layer + "_fprop";
          if (layer == "qkv") {
            op.kind = OpKind::ag_gemm;
            op.k = m.hidden;
            op.n = m.qkv_out();
          } else if (layer == "fc1") {
            op.kind = OpKind::ag_gemm;
            op.k = m.hidden;
            op.n = m.fc1_out();
          } else if (layer == "proj") {
            op.kind = OpKind::gemm_rs;
            op.k = m.hidden;
            op.n = m.hidden;
          } else {
            op.kind = OpKind::gemm_rs;
            op.k = m.ffn;
            op.n = m.hidden;
          }
          grid.push_back(GridEntry{m.name, layer, std::move(op)});
        }
      }
    }
  }
  return grid;
}

}  // namespace compass::workload
