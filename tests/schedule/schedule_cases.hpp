#pragma once
// The operator x strategy x p x shape x plan grid shared by the schedule property tests.

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <memory>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "compass/hardware/presets.hpp"
#include "compass/schedule/generate.hpp"
#include "compass/schedule/patterns.hpp"

namespace compass::schedule::testing {

struct Case {
  workload::OperatorSpec op;
  Strategy strategy;
  /// Shared: GoogleTest copies each parameter several times while it registers ~2,500 cases in
  /// every test process, and a plan with tree routes is p² route vectors.
  std::shared_ptr<const CommPlan> plan_ptr;
  std::string plan_name;

  const CommPlan& plan() const { return *plan_ptr; }
  /// The options its schedule is generated with (grid_options).
  GenerateOptions options() const;

  std::string label() const {
    return fmt::format("{} M={} N={} K={} p={} {} plan={}", workload::to_string(op.kind), op.m,
                       op.n, op.k, op.tp, to_string(strategy), plan_name);
  }
};

/// A test name from a case: its index and label with every other character than letters and
/// digits turned into '_'.
inline std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  std::string s = fmt::format("{}_{}", info.index, info.param.label());
  for (char& ch : s)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return s;
}

/// GoogleTest prints parameters with this instead of a byte dump.
inline void PrintTo(const Case& c, std::ostream* os) { *os << c.label(); }

inline workload::OperatorSpec make_op(workload::OpKind kind, std::int64_t m, std::int64_t n,
                                      std::int64_t k, int p) {
  workload::OperatorSpec o;
  o.kind = kind;
  o.m = m;
  o.n = n;
  o.k = k;
  o.tp = p;
  o.dtype = DType::bf16;
  return o;
}

/// Shapes per op and p: odd N and K, one-row shards (halves of 1 and 0 rows), and for gemm_ar
/// M not divisible by p (uneven chunks, some empty when M < p).
inline std::vector<workload::OperatorSpec> shapes(workload::OpKind kind, int p) {
  using workload::OpKind;
  std::vector<workload::OperatorSpec> out;
  switch (kind) {
    case OpKind::ag_gemm:
      out.push_back(make_op(kind, 6 * p, 3 * p, 5, p));
      out.push_back(make_op(kind, p, p, 7, p));
      out.push_back(make_op(kind, 3 * p, 2 * p, 1, p));
      break;
    case OpKind::gemm_rs:
      out.push_back(make_op(kind, 6 * p, 7, 3 * p, p));
      out.push_back(make_op(kind, p, 5, p, p));
      out.push_back(make_op(kind, 3 * p, 1, 2 * p, p));
      break;
    case OpKind::gemm_ar:
      out.push_back(make_op(kind, 6 * p, 7, 3 * p, p));
      out.push_back(make_op(kind, p, 5, p, p));
      out.push_back(make_op(kind, 2 * p + 1, 3, p, p));
      out.push_back(make_op(kind, 1, 2, p, p));
      break;
  }
  return out;
}

inline std::vector<Strategy> strategies() {
  return {Strategy{StrategyKind::sequential, 0},      Strategy{StrategyKind::decompose, 1},
          Strategy{StrategyKind::decompose, 2},       Strategy{StrategyKind::decompose, 3},
          Strategy{StrategyKind::fuse_all2all, 0},    Strategy{StrategyKind::fuse_ring, 0},
          Strategy{StrategyKind::fuse_double_ring, 0}, Strategy{StrategyKind::fuse_hier, 0},
          Strategy{StrategyKind::fuse_synth, 0}};
}

/// Tree plans that exercise forwarding: `hier` sends each shard down a shuffled chain in two
/// trees (shares 1/3 and 2/3) cut into 2 pipeline chunks; `synth` uses a binary tree over a
/// shuffled order (share 1) in 3 chunks.
inline void shuffled_trees(CommPlan& plan, std::mt19937& rng) {
  const int p = static_cast<int>(plan.gpus.size());
  plan.hier.trees.clear();
  plan.synth.trees.clear();
  plan.hier.chunks = 2;
  plan.synth.chunks = 3;
  for (int root = 0; root < p; ++root) {
    for (double share : {1.0 / 3.0, 2.0 / 3.0}) {
      std::vector<int> order;
      for (int r = 0; r < p; ++r)
        if (r != root) order.push_back(r);
      std::shuffle(order.begin(), order.end(), rng);
      RankTree t{root, share, {}};
      int prev = root;
      for (int r : order) {
        t.edges.push_back({prev, r});
        prev = r;
      }
      plan.hier.trees.push_back(t);
    }
    std::vector<int> order{root};
    for (int r = 0; r < p; ++r)
      if (r != root) order.push_back(r);
    std::shuffle(order.begin() + 1, order.end(), rng);
    RankTree t{root, 1.0, {}};
    for (std::size_t i = 1; i < order.size(); ++i) t.edges.push_back({order[(i - 1) / 2], order[i]});
    plan.synth.trees.push_back(t);
  }
  // Routes through one switch whose per-rank links have random speeds, so that the send order
  // (tree_allgather_program) differs from the pipeline rounds' order.
  std::uniform_real_distribution<double> bw(1e9, 4e9);
  std::vector<double> up(static_cast<std::size_t>(p)), down(static_cast<std::size_t>(p));
  for (int r = 0; r < p; ++r) {
    up[static_cast<std::size_t>(r)] = bw(rng);
    down[static_cast<std::size_t>(r)] = bw(rng);
  }
  std::vector<RouteCost> routes(static_cast<std::size_t>(p) * p);
  for (int a = 0; a < p; ++a)
    for (int b = 0; b < p; ++b)
      if (a != b)
        routes[static_cast<std::size_t>(a) * p + b] =
            RouteCost{1e-6, {{2 * a, up[static_cast<std::size_t>(a)]},
                             {2 * b + 1, down[static_cast<std::size_t>(b)]}}};
  plan.hier.routes = routes;
  plan.synth.routes = routes;
}

/// The generator options of a grid case: the shuffled plans' tree reduce-scatters are ordered
/// by a machine's GEMM and add costs (a6000x8's: the list schedule, tree_reduce_scatter_program)
/// rather than the untimed round order of the default plan.
inline GenerateOptions grid_options(const std::string& plan_name, const CommPlan& plan,
                                    const workload::OperatorSpec& op) {
  GenerateOptions o;
  if (plan_name.rfind("shuffled", 0) == 0) {
    static const hardware::Profile machine = hardware::make_preset("a6000x8").value();
    o.tree_rs_costs = tree_rs_costs(machine, plan, op);
  }
  return o;
}

/// Default plan; a shuffled ring with an unrelated shuffled second ring; one copy engine.
inline std::vector<std::pair<std::string, CommPlan>> plans(int p) {
  std::vector<std::pair<std::string, CommPlan>> out;
  out.emplace_back("default", default_comm_plan(p));
  CommPlan shuffled = default_comm_plan(p);
  std::mt19937 rng(1234u + static_cast<unsigned>(p));
  std::shuffle(shuffled.ring.begin(), shuffled.ring.end(), rng);
  std::shuffle(shuffled.ring2.begin(), shuffled.ring2.end(), rng);
  shuffled_trees(shuffled, rng);
  out.emplace_back("shuffled", shuffled);
  CommPlan one_engine = shuffled;
  one_engine.copy_engines = 1;
  out.emplace_back("shuffled-1ce", one_engine);
  return out;
}

/// Calls f(op, plan_name, plan) for every p in {1, 2, 3, 4, 8}, operator kind, shape of
/// shapes() and plan of plans(): the case grid without its strategies.
template <typename F>
void for_each_shape_and_plan(F&& f) {
  for (int p : {1, 2, 3, 4, 8})
    for (workload::OpKind kind :
         {workload::OpKind::ag_gemm, workload::OpKind::gemm_rs, workload::OpKind::gemm_ar})
      for (const workload::OperatorSpec& op : shapes(kind, p))
        for (const auto& [name, plan] : plans(p)) f(op, name, plan);
}

/// True when the strategy is defined for the op (decompose:d needs d | M/p when d > 1).
inline bool feasible(const workload::OperatorSpec& op, const Strategy& s) {
  if (s.kind != StrategyKind::decompose || s.parts == 1) return true;
  return op.m % op.tp == 0 && (op.m / op.tp) % s.parts == 0;
}

inline GenerateOptions Case::options() const { return grid_options(plan_name, plan(), op); }

inline std::vector<Case> all_cases() {
  std::vector<Case> out;
  for (auto kind :
       {workload::OpKind::ag_gemm, workload::OpKind::gemm_rs, workload::OpKind::gemm_ar})
    for (int p : {1, 2, 3, 4, 8}) {
      // Built once per p: every test process builds the whole list before it runs one case.
      std::vector<std::pair<std::string, std::shared_ptr<const CommPlan>>> p_plans;
      for (auto& [name, plan] : plans(p))
        p_plans.emplace_back(name, std::make_shared<const CommPlan>(std::move(plan)));
      for (const auto& op : shapes(kind, p))
        for (const auto& st : strategies())
          for (const auto& [name, plan] : p_plans) out.push_back(Case{op, st, plan, name});
    }
  return out;
}

}  // namespace compass::schedule::testing
