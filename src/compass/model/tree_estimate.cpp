#include "compass/model/tree_estimate.hpp"

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>

#include "compass/hardware/gemm_cost.hpp"
#include "compass/hardware/synthesis.hpp"
#include "compass/model/cache_tables.hpp"
#include "compass/model/comm_model.hpp"
#include "compass/model/program.hpp"
#include "compass/schedule/patterns.hpp"
#include "compass/schedule/program.hpp"

namespace compass::model::detail {

using workload::OpKind;

namespace {

// The words of a memo key that name a tree pattern, its group and its copy engines, each given
// to `put` in order.
template <class Put>
void visit_pattern(const schedule::TreePlan& tp, const schedule::CommPlan& plan, Put&& put) {
  put(static_cast<std::uint64_t>(plan.copy_engines));
  put(plan.gpus.size());
  for (int g : plan.gpus) put(static_cast<std::uint64_t>(g));
  put(static_cast<std::uint64_t>(tp.chunks));
  put(tp.trees.size());
  for (const schedule::RankTree& t : tp.trees) {
    put(static_cast<std::uint64_t>(t.root));
    put(key_bits(t.share));
    put(t.edges.size());
    for (auto [a, b] : t.edges)
      put(static_cast<std::uint64_t>(static_cast<std::uint32_t>(a)) << 32 |
          static_cast<std::uint32_t>(b));
  }
  put(tp.routes.size());
  for (const schedule::RouteCost& rc : tp.routes) {
    put(key_bits(rc.fixed_s));
    put(rc.links.size());
    for (auto [dir, bw] : rc.links) {
      put(static_cast<std::uint64_t>(dir));
      put(key_bits(bw));
    }
  }
}

// Whether `words` are the pattern's (visit_pattern), read without building them.
bool names_pattern(const std::vector<std::uint64_t>& words, const schedule::TreePlan& tp,
                   const schedule::CommPlan& plan) {
  std::size_t at = 0;
  bool same = true;
  visit_pattern(tp, plan, [&](std::uint64_t w) {
    same = same && at < words.size() && words[at] == w;
    ++at;
  });
  return same && at == words.size();
}

// Bounds the patterns a memo tells apart (a planner meets a few per group).
constexpr std::size_t kMaxPatterns = 64;

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

std::shared_ptr<const FusedProgram> program_by_structure(
    TreeMemo& memo, const std::vector<std::uint64_t>& structure_key,
    const std::function<schedule::Program()>& build, const hardware::Profile& prof,
    const workload::OperatorSpec& op, const std::vector<int>& gpus, double row_bytes) {
  auto sk = memo.skeletons.find(structure_key);
  if (sk != memo.skeletons.end())
    return std::make_shared<const FusedProgram>(
        reprice_program(*sk->second.prepared, *sk->second.program, prof, op, gpus.front()));
  constexpr std::size_t kSkeletons = 256;
  if (memo.skeletons.size() >= kSkeletons) memo.skeletons.clear();
  auto structure = std::make_shared<const schedule::Program>(build());
  auto built = std::make_shared<FusedProgram>(price_program(*structure, prof, op, gpus.front()));
  prepare_program(*built, prof, gpus, row_bytes);
  memo.skeletons.emplace(structure_key, TreeMemo::Skeleton{structure, built});
  return built;
}

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
  TreeMemo& memo = memo_for(caches.tables().trees, prof);
  // The pattern, its group and engines, named in every key below by its index among the
  // patterns the memo has met.
  std::uint64_t pattern_id = memo.patterns.size();
  {
    for (std::size_t i = 0; i < memo.patterns.size() && pattern_id == memo.patterns.size(); ++i)
      if (names_pattern(memo.patterns[i], tp, plan)) pattern_id = i;
    if (pattern_id == memo.patterns.size()) {
      std::vector<std::uint64_t> pattern;
      visit_pattern(tp, plan, [&](std::uint64_t w) { pattern.push_back(w); });
      if (memo.patterns.size() >= kMaxPatterns) {  // every key names an index: start afresh
        std::optional<hardware::Profile> prof_kept = std::move(memo.profile);
        const hardware::Profile* checked = memo.checked;
        memo = TreeMemo{};
        memo.profile = std::move(prof_kept);
        memo.checked = checked;
        pattern_id = 0;
      }
      memo.patterns.push_back(std::move(pattern));
    }
  }
  auto sealed = [&](std::initializer_list<std::uint64_t> head) {
    std::vector<std::uint64_t> key;
    key.reserve(head.size() + 1);
    key.insert(key.end(), head);
    key.push_back(pattern_id);
    seal_key(key);
    return key;
  };
  const std::vector<std::uint64_t> key =
      sealed({0, static_cast<std::uint64_t>(op.kind), static_cast<std::uint64_t>(op.dtype),
              static_cast<std::uint64_t>(op.m), static_cast<std::uint64_t>(op.n),
              static_cast<std::uint64_t>(op.k), key_bits(c.launch), key_bits(c.copy_issue),
              key_bits(c.flag_wait), key_bits(c.fg), key_bits(c.fc)});
  // The reduce-scatter's order depends on its estimated compute costs too.
  std::optional<schedule::TreeRsCosts> rs_costs;
  auto rc = [&]() -> const schedule::TreeRsCosts& {
    if (!rs_costs)
      rs_costs = ag ? schedule::TreeRsCosts{} : schedule::tree_rs_costs(prof, plan, op);
    return *rs_costs;
  };
  std::vector<std::uint64_t> comm_key;
  if (c.details)
    comm_key = sealed({0, static_cast<std::uint64_t>(op.kind), static_cast<std::uint64_t>(op.m),
                       key_bits(row_bytes), key_bits(rc().gemm_row_s), key_bits(rc().add_row_s),
                       key_bits(rc().item_s)});
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
  const std::vector<std::uint64_t> program_key =
      sealed({0, static_cast<std::uint64_t>(op.kind), static_cast<std::uint64_t>(op.dtype),
              static_cast<std::uint64_t>(op.m), static_cast<std::uint64_t>(op.n),
              static_cast<std::uint64_t>(op.k)});
  std::shared_ptr<const FusedProgram> program;
  for (const auto& [k, pr] : memo.programs)
    if (k == program_key) program = pr;
  if (!program) {
    // The pattern's program (schedule/program.hpp) reads the operator's kind, rows and row
    // bytes (and a reduce-scatter's compute costs), never what only prices its items: built
    // and routed once per structure, priced on the group's first GPU per operator.
    const std::vector<std::uint64_t> structure_key =
        sealed({0, static_cast<std::uint64_t>(op.kind), static_cast<std::uint64_t>(op.m),
                static_cast<std::uint64_t>(op.tp), key_bits(row_bytes), key_bits(rc().gemm_row_s),
                key_bits(rc().add_row_s), key_bits(rc().item_s)});
    program = program_by_structure(
        memo, structure_key, [&] { return schedule::tree_program(op, tp, plan, rc()); }, prof, op,
        plan.gpus, row_bytes);
    constexpr std::size_t kPrograms = 4;
    if (memo.programs.size() >= kPrograms) memo.programs.erase(memo.programs.begin());
    memo.programs.emplace_back(program_key, program);
  }
  if (!known) {
    const Followed f = follow_program(*program, c, true, caches.tables().following);
    // Busiest link direction of the all-gather along the trees (the reduce-scatter loads the
    // reverse directions the same way).
    // It reads the direction, the group and the trees only: found once per pattern.
    const std::vector<std::uint64_t> load_key = sealed({0, static_cast<std::uint64_t>(ag)});
    auto bn = memo.bottlenecks.find(load_key);
    if (bn == memo.bottlenecks.end()) {
      hardware::TreePattern hp;
      hp.gpus = plan.gpus;
      for (const schedule::RankTree& rt : tp.trees) {
        hardware::BroadcastTree bt{plan.gpus[rt.root], rt.share, {}};
        for (auto [a, b] : rt.edges)
          bt.edges.push_back(ag ? std::make_pair(plan.gpus[a], plan.gpus[b])
                                : std::make_pair(plan.gpus[b], plan.gpus[a]));
        hp.trees.push_back(std::move(bt));
      }
      constexpr std::size_t kBottlenecks = 256;
      if (memo.bottlenecks.size() >= kBottlenecks) memo.bottlenecks.clear();
      bn = memo.bottlenecks
               .emplace(load_key, hardware::allgather_load_pattern(prof, hp, 1.0).bottleneck)
               .first;
    }
    known = TreeResult{f.end_s, f.work_s, bn->second};
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
