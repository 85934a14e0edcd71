#include "compass/model/tree_estimate.hpp"

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>

#include "compass/hardware/gemm_cost.hpp"
#include "compass/hardware/synthesis.hpp"
#include "compass/hardware/task_costs.hpp"
#include "compass/model/cache_tables.hpp"
#include "compass/model/comm_model.hpp"
#include "compass/model/program.hpp"
#include "compass/schedule/patterns.hpp"

namespace compass::model::detail {

using workload::OpKind;

namespace {

using Item = FusedProgram::Item;
using Send = FusedProgram::Send;

// Flat tables over (rank, owner, piece) and (sender, receiver) for program_of's bookkeeping.
class PieceTable {
 public:
  PieceTable(int p, std::size_t pieces) : p_(p), pieces_(pieces), v_(p * p * pieces, -1) {}
  int& at(int rank, int owner, int piece) {
    return v_[(static_cast<std::size_t>(rank) * p_ + owner) * pieces_ + piece];
  }

 private:
  int p_;
  std::size_t pieces_;
  std::vector<int> v_;
};

// The program of `op` along `tp`, in the generator's order (schedule/patterns.cpp): the same
// rounds, pieces, engines and compute order.
template <class Gemm, class Add>
FusedProgram program_of(const workload::OperatorSpec& op, const schedule::TreePlan& tp,
                   const schedule::CommPlan& plan, const std::vector<schedule::TreeShape>& sh,
                   const std::vector<std::vector<schedule::TreePiece>>& pieces, double row_bytes,
                   const Gemm& gemm, const Add& add) {
  const int p = op.tp;
  std::size_t max_pieces = 1;
  for (const auto& pc : pieces) max_pieces = std::max(max_pieces, pc.size());
  FusedProgram pr;
  pr.items.resize(p);
  std::vector<int> last_on_engine;  // [engine * p + rank] -> its last transfer (-1: none)
  auto push_send = [&](Send sd, int engine) {
    const std::size_t at = static_cast<std::size_t>(engine) * p + sd.from;
    if (at >= last_on_engine.size()) last_on_engine.resize(at + 1, -1);
    sd.after = last_on_engine[at];
    last_on_engine[at] = static_cast<int>(pr.sends.size());
    pr.sends.push_back(sd);
    return static_cast<int>(pr.sends.size()) - 1;
  };
  auto push_item = [&](int v, Item it) {
    pr.items[v].push_back(it);
    return static_cast<int>(pr.items[v].size()) - 1;
  };
  PieceTable last_item(p, max_pieces);  // (rank, owner, piece) -> item
  // The all-gather down the trees in the generator's program order
  // (schedule::tree_allgather_program); `root_items`: a root's send waits for the root's item
  // completing the piece; with `gemms`, every rank computes each piece where it arrives.
  auto allgather = [&](bool gemms, bool root_items) {
    PieceTable into(p, max_pieces);  // (rank, owner, piece) -> transfer
    for (const schedule::TreeAgStep& st :
         schedule::tree_allgather_program(tp, sh, pieces, row_bytes, plan.copy_engines)) {
      const int a = st.from, b = st.to, j = st.owner, pi = st.piece;
      const std::int64_t len = pieces[j][static_cast<std::size_t>(pi)].len;
      if (st.arrival) {
        if (gemms) push_item(b, Item{false, gemm(len), into.at(b, j, pi)});
        continue;
      }
      Send sd{a, b, -1, -1, -1, len};
      if (a != j) sd.dep_flow = into.at(a, j, pi);
      else if (root_items) sd.ready_item = last_item.at(j, j, pi);
      into.at(b, j, pi) = push_send(sd, st.engine);
    }
  };
  if (op.kind == OpKind::ag_gemm) {
    for (int r = 0; r < p; ++r) push_item(r, Item{false, gemm(workload::shard_rows(op)), -1});
    allgather(true, false);
    return pr;
  }
  // Reduce-scatter up the trees, in the order of schedule::tree_reduce_scatter_program.
  const std::vector<int> up = schedule::tree_engine_table(tp, p, plan.copy_engines, true);
  PieceTable sent(p, max_pieces);  // (sender, owner, piece) -> transfer
  for (const schedule::TreeRsStep& st : schedule::tree_reduce_scatter_program(
           tp, sh, pieces, row_bytes, schedule::tree_rs_costs(plan, op), plan.copy_engines)) {
    const schedule::TreePiece& pc = pieces[st.owner][static_cast<std::size_t>(st.piece)];
    const int v = st.rank, j = st.owner, pi = st.piece;
    switch (st.kind) {
      case schedule::TreeRsStep::Kind::gemm:
        last_item.at(v, j, pi) = push_item(v, Item{false, gemm(pc.len), -1});
        break;
      case schedule::TreeRsStep::Kind::add:
        last_item.at(v, j, pi) = push_item(v, Item{true, add(pc.len), sent.at(st.peer, j, pi)});
        break;
      case schedule::TreeRsStep::Kind::send:
        sent.at(v, j, pi) = push_send(Send{v, st.peer, -1, last_item.at(v, j, pi), -1, pc.len},
                                      up[v * p + st.peer]);
        break;
    }
  }
  // gemm_ar: the reduced pieces go down the same trees, after every reduce-scatter transfer in
  // program order.
  if (op.kind == OpKind::gemm_ar) allgather(false, true);
  return pr;
}

// The words of a memo key that name a tree pattern, its group and its copy engines.
void append_pattern(const schedule::TreePlan& tp, const schedule::CommPlan& plan,
                    std::vector<std::uint64_t>& key) {
  key.push_back(static_cast<std::uint64_t>(plan.copy_engines));
  key.push_back(plan.gpus.size());
  for (int g : plan.gpus) key.push_back(static_cast<std::uint64_t>(g));
  key.push_back(static_cast<std::uint64_t>(tp.chunks));
  key.push_back(tp.trees.size());
  for (const schedule::RankTree& t : tp.trees) {
    key.insert(key.end(), {static_cast<std::uint64_t>(t.root), key_bits(t.share), t.edges.size()});
    for (auto [a, b] : t.edges)
      key.push_back(static_cast<std::uint64_t>(static_cast<std::uint32_t>(a)) << 32 |
                    static_cast<std::uint32_t>(b));
  }
  key.push_back(tp.routes.size());
  for (const schedule::RouteCost& rc : tp.routes) {
    key.insert(key.end(), {key_bits(rc.fixed_s), rc.links.size()});
    for (auto [dir, bw] : rc.links) key.insert(key.end(), {static_cast<std::uint64_t>(dir), key_bits(bw)});
  }
}

// Bounds the memo by the words its keys hold (the planner's working set is far below it).
constexpr std::size_t kMaxTreeMemoWords = std::size_t{1} << 20;  // 8 MiB of keys

template <class Value>
void remember(TreeMemo& memo, std::unordered_map<std::vector<std::uint64_t>, Value, KeyHash>& table,
              const std::vector<std::uint64_t>& key, Value value) {
  if (memo.words + key.size() > kMaxTreeMemoWords) {
    memo.results.clear();
    memo.comm.clear();
    memo.words = 0;
  }
  if (table.emplace(key, std::move(value)).second) memo.words += key.size();
}

}  // namespace

TreeOutcome tree_estimate(const hardware::Profile& prof, const workload::OperatorSpec& op,
                          const schedule::TreePlan& tp, const schedule::CommPlan& plan,
                          const TreeCosts& c, Caches& caches) {
  TreeOutcome o;
  const int p = op.tp;
  const double e = dtype_bytes(op.dtype);
  const bool ag = op.kind == OpKind::ag_gemm;
  const workload::GemmShape local = workload::local_gemm(op);
  const int gpu = plan.gpus.front();
  if (p == 1) {
    const double g = hardware::gemm_compute_s(prof, local.m, local.n, local.k, op.dtype, gpu);
    o.total_s = c.launch + g;
    o.compute_s = g;
    return o;
  }
  const double row_bytes = (ag ? op.k : op.n) * e;
  // The memo (cache_tables.hpp): answers for this profile only, keyed by every other input.
  TreeMemo& memo = caches.tables().trees;
  if (!memo.profile || !(*memo.profile == prof)) {
    memo = TreeMemo{};
    memo.profile = prof;
  }
  std::vector<std::uint64_t> key = {0,
                                    static_cast<std::uint64_t>(op.kind),
                                    static_cast<std::uint64_t>(op.dtype),
                                    static_cast<std::uint64_t>(op.m),
                                    static_cast<std::uint64_t>(op.n),
                                    static_cast<std::uint64_t>(op.k),
                                    key_bits(c.launch),
                                    key_bits(c.copy_issue),
                                    key_bits(c.flag_wait),
                                    key_bits(c.fg),
                                    key_bits(c.fc)};
  append_pattern(tp, plan, key);
  seal_key(key);
  std::vector<std::uint64_t> comm_key;
  if (c.details) {
    // The reduce-scatter's order depends on its estimated compute costs too.
    const schedule::TreeRsCosts rc = ag ? schedule::TreeRsCosts{} : schedule::tree_rs_costs(plan, op);
    comm_key = {0, static_cast<std::uint64_t>(op.kind), static_cast<std::uint64_t>(op.m),
                key_bits(row_bytes), key_bits(rc.gemm_row_s), key_bits(rc.add_row_s),
                key_bits(rc.item_s)};
    append_pattern(tp, plan, comm_key);
    seal_key(comm_key);
  }
  std::optional<TreeResult> known;
  std::optional<double> known_comm;
  if (auto it = memo.results.find(key); it != memo.results.end()) known = it->second;
  if (c.details)
    if (auto it = memo.comm.find(comm_key); it != memo.comm.end()) known_comm = it->second;
  auto answer = [&]() {
    o.total_s = known->total_s;
    o.compute_s = known->compute_s;
    o.bottleneck = known->bottleneck;
    if (c.details) o.comm_s = *known_comm;
    return o;
  };
  if (known && (!c.details || known_comm)) return answer();
  // The program, built and prepared once per operator and pattern (the last few are kept).
  std::vector<std::uint64_t> program_key = {0, static_cast<std::uint64_t>(op.kind),
                                            static_cast<std::uint64_t>(op.dtype),
                                            static_cast<std::uint64_t>(op.m),
                                            static_cast<std::uint64_t>(op.n),
                                            static_cast<std::uint64_t>(op.k)};
  append_pattern(tp, plan, program_key);
  seal_key(program_key);
  std::shared_ptr<const FusedProgram> program;
  for (const auto& [k, pr] : memo.programs)
    if (k == program_key) program = pr;
  if (!program) {
    // A fused kernel's chunks share one GEMM's waves (hardware::fused_chunk_compute_s); every
    // rank computes all M rows of its local GEMM.
    std::map<std::int64_t, double> gemm_cache;
    auto gemm = [&](std::int64_t rows) {
      auto it = gemm_cache.find(rows);
      if (it != gemm_cache.end()) return it->second;
      const double t =
          hardware::fused_chunk_compute_s(prof, rows, local.m, local.n, local.k, op.dtype, gpu);
      gemm_cache.emplace(rows, t);
      return t;
    };
    const std::int64_t rows_per_root =
        ag ? workload::shard_rows(op) : workload::max_row_share(op);
    const int chunks = schedule::tree_chunks(tp, static_cast<double>(rows_per_root) * row_bytes);
    const std::vector<schedule::TreeShape> sh = schedule::tree_shapes(tp, p);
    std::vector<std::vector<schedule::TreePiece>> pieces(p);
    for (int j = 0; j < p; ++j)
      pieces[j] = schedule::tree_pieces(
          tp, j, ag ? workload::shard_rows(op) : workload::row_share(op, j).len, chunks);
    auto add = [&](std::int64_t rows) {
      return hardware::add_s(prof, gpu, static_cast<double>(rows) * row_bytes);
    };
    auto built = std::make_shared<FusedProgram>(
        program_of(op, tp, plan, sh, pieces, row_bytes, gemm, add));
    prepare_program(*built, prof, plan.gpus, row_bytes);
    program = built;
    constexpr std::size_t kPrograms = 4;
    if (memo.programs.size() >= kPrograms) memo.programs.erase(memo.programs.begin());
    memo.programs.emplace_back(program_key, program);
  }
  if (!known) {
    const Followed f = follow_program(*program, c, true, caches.tables().following);
    // Busiest link direction of the all-gather along the trees (the reduce-scatter loads the
    // reverse directions the same way).
    hardware::TreePattern hp;
    hp.gpus = plan.gpus;
    for (const schedule::RankTree& rt : tp.trees) {
      hardware::BroadcastTree bt{plan.gpus[rt.root], rt.share, {}};
      for (auto [a, b] : rt.edges)
        bt.edges.push_back(ag ? std::make_pair(plan.gpus[a], plan.gpus[b])
                              : std::make_pair(plan.gpus[b], plan.gpus[a]));
      hp.trees.push_back(std::move(bt));
    }
    known = TreeResult{f.end_s, f.work_s,
                       hardware::allgather_load_pattern(prof, hp, 1.0).bottleneck};
    remember(memo, memo.results, key, *known);
  }
  if (c.details && !known_comm) {
    // The communication alone: the same program without GEMM, adds, overheads or interference.
    known_comm = follow_program(*program, FollowCosts{}, false, caches.tables().following).end_s;
    remember(memo, memo.comm, comm_key, *known_comm);
  }
  return answer();
}

}  // namespace compass::model::detail
