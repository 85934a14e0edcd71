// comm_plan_for: the profile's topology-aware rings mapped to rank numbers.

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <tuple>

#include "compass/hardware/presets.hpp"
#include "compass/hardware/task_costs.hpp"
#include "compass/workload/operator.hpp"
#include "compass/schedule/patterns.hpp"
#include "schedule_cases.hpp"

namespace compass::schedule {
namespace {

bool is_permutation_of_ranks(std::vector<int> v, int p) {
  std::sort(v.begin(), v.end());
  for (int i = 0; i < p; ++i)
    if (static_cast<int>(v.size()) != p || v[static_cast<std::size_t>(i)] != i) return false;
  return true;
}

TEST(CommPlan, MapsTheProfileRingsToRanks) {
  for (const std::string& name : hardware::preset_names()) {
    auto profile = hardware::make_preset(name);
    ASSERT_TRUE(profile.ok()) << name;
    const int n = std::min(profile->gpu_count(), 8);
    // A group that does not start at GPU 0, so GPU ordinals and ranks differ.
    std::vector<int> gpus;
    for (int g = profile->gpu_count() - n; g < profile->gpu_count(); ++g) gpus.push_back(g);
    auto plan = comm_plan_for(*profile, gpus);
    ASSERT_TRUE(plan.ok()) << name << ": " << plan.error().message;
    EXPECT_EQ(plan->gpus, gpus);
    EXPECT_TRUE(is_permutation_of_ranks(plan->ring, n)) << name;
    EXPECT_TRUE(is_permutation_of_ranks(plan->ring2, n)) << name;
    EXPECT_GE(plan->copy_engines, 1);
    // The plan generates a valid double-ring schedule.
    auto s = generate(testing::make_op(workload::OpKind::ag_gemm, 4 * n, 2 * n, 3, n),
                      Strategy{StrategyKind::fuse_double_ring, 0}, *plan);
    ASSERT_TRUE(s.ok()) << s.error().message;
    EXPECT_EQ(s->gpus, gpus);
  }
}

// Chunks pipeline forwarding behind arrival. The ring's paths (rtx4090x8's fuse:synth: its
// ring meets the cut bound by load, the trees do not) keep every rank sending one shard to its
// successor in every round, so they run unchunked; a6000x8's hierarchy starts with only the
// roots sending and is cut into pieces of at most 1 MiB, at most 32 chunks.
TEST(CommPlan, OnlyUnbalancedTreePlansArePipelinedInChunks) {
  auto rtx = hardware::make_preset("rtx4090x8");
  ASSERT_TRUE(rtx.ok());
  auto plan = comm_plan_for(*rtx, {0, 1, 2, 3, 4, 5, 6, 7});
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  ASSERT_EQ(plan->synth.trees.size(), 8u);
  for (const RankTree& t : plan->synth.trees) {
    // A path along the ring from the root.
    for (std::size_t e = 1; e < t.edges.size(); ++e)
      EXPECT_EQ(t.edges[e].first, t.edges[e - 1].second);
    ASSERT_FALSE(t.edges.empty());
    EXPECT_EQ(plan->ring[static_cast<std::size_t>(
                  std::find(plan->ring.begin(), plan->ring.end(), t.root) - plan->ring.begin() +
                  1) % 8],
              t.edges.front().second);
  }
  EXPECT_EQ(tree_chunks(plan->synth, 128.0 * 1024 * 1024), 1);
  EXPECT_EQ(tree_chunks(direct_tree_plan(8), 128.0 * 1024 * 1024), 1);
  auto a6000 = hardware::make_preset("a6000x8");
  ASSERT_TRUE(a6000.ok());
  auto hier = comm_plan_for(*a6000, {0, 1, 2, 3, 4, 5, 6, 7});
  ASSERT_TRUE(hier.ok()) << hier.error().message;
  EXPECT_EQ(tree_chunks(hier->hier, 128.0 * 1024 * 1024), 32);
  EXPECT_EQ(tree_chunks(hier->hier, 8.0 * 1024 * 1024), 8);
  EXPECT_EQ(tree_chunks(hier->hier, 2.4 * 1024 * 1024), 3);
  EXPECT_EQ(tree_chunks(hier->hier, 0.2 * 1024 * 1024), 1);
  // An explicit chunk count wins.
  TreePlan fixed = plan->synth;
  fixed.chunks = 5;
  EXPECT_EQ(tree_chunks(fixed, 128.0 * 1024 * 1024), 5);
}

// Automatic chunks are divided among a root's trees by share (pieces of about equal size); an
// explicit chunk count cuts every tree into that many.
TEST(CommPlan, AutomaticChunksAreDividedAmongTreesByShare) {
  TreePlan plan;
  plan.trees.push_back({0, 0.75, {{0, 1}, {1, 2}}});
  plan.trees.push_back({0, 0.25, {{0, 2}, {2, 1}}});
  plan.trees.push_back({1, 1.0, {{1, 0}, {0, 2}}});
  plan.trees.push_back({2, 1.0, {{2, 0}, {0, 1}}});
  ASSERT_TRUE(validate_tree_plan(plan, 3).ok());
  auto count = [](const std::vector<TreePiece>& pieces, int tree) {
    std::int64_t rows = 0;
    int n = 0;
    for (const TreePiece& pc : pieces)
      if (pc.tree == tree) {
        ++n;
        rows += pc.len;
      }
    return std::make_pair(n, rows);
  };
  const std::vector<TreePiece> automatic = tree_pieces(plan, 0, 800, 8);
  EXPECT_EQ(count(automatic, 0), std::make_pair(6, std::int64_t{600}));
  EXPECT_EQ(count(automatic, 1), std::make_pair(2, std::int64_t{200}));
  for (const TreePiece& pc : automatic) EXPECT_EQ(pc.len, 100);
  plan.chunks = 8;
  const std::vector<TreePiece> fixed = tree_pieces(plan, 0, 800, 8);
  EXPECT_EQ(count(fixed, 0), std::make_pair(8, std::int64_t{600}));
  EXPECT_EQ(count(fixed, 1), std::make_pair(8, std::int64_t{200}));
}

// The all-gather's program: every tree edge of every piece sent once, each send after the
// send that brings its piece to the sender and each arrival after its send; and the order
// follows expected arrival. Rank 1 forwards root 0's pieces to rank 2 and sends its own to
// rank 0 on its one copy engine; with the route 0 -> 1 a hundred times slower than the others,
// root 0's pieces reach rank 1 late, so rank 1 sends all its own pieces before it forwards
// any, where the pipeline rounds (chunk k of a forward in round k + 1, of its own in round k)
// would interleave them and leave ready pieces behind ones still on their way.
TEST(CommPlan, AllGatherProgramFollowsExpectedArrival) {
  const int p = 3;
  TreePlan plan;
  plan.trees.push_back({0, 1.0, {{0, 1}, {1, 2}}});
  plan.trees.push_back({1, 1.0, {{1, 0}, {0, 2}}});
  plan.trees.push_back({2, 1.0, {{2, 0}, {0, 1}}});
  plan.chunks = 4;
  plan.routes.resize(p * p);
  for (int a = 0; a < p; ++a)
    for (int b = 0; b < p; ++b)
      if (a != b)
        plan.routes[static_cast<std::size_t>(a * p + b)] =
            RouteCost{1e-6, {{a * p + b, a == 0 && b == 1 ? 1e7 : 1e9}}};
  ASSERT_TRUE(validate_tree_plan(plan, p).ok());
  const std::vector<TreeShape> shapes = tree_shapes(plan, p);
  std::vector<std::vector<TreePiece>> pieces(p);
  for (int j = 0; j < p; ++j) pieces[j] = tree_pieces(plan, j, 400, tree_chunks(plan, 0));
  const std::vector<TreeAgStep> program = tree_allgather_program(plan, shapes, pieces, 1e4, 1);
  // (rank, owner, piece) -> position of its arrival; sends and arrivals counted per edge.
  std::map<std::tuple<int, int, int>, std::size_t> arrived;
  std::map<std::tuple<int, int, int, int>, int> sent, landed;
  for (std::size_t i = 0; i < program.size(); ++i) {
    const TreeAgStep& st = program[i];
    const std::tuple<int, int, int, int> edge{st.from, st.to, st.owner, st.piece};
    if (st.arrival) {
      EXPECT_EQ(sent.count(edge), 1u) << "arrival before its send at " << i;
      ++landed[edge];
      arrived[{st.to, st.owner, st.piece}] = i;
      continue;
    }
    ++sent[edge];
    if (st.from != st.owner) {
      EXPECT_EQ(arrived.count({st.from, st.owner, st.piece}), 1u)
          << "rank " << st.from << " forwards a piece of " << st.owner << " before it arrives";
    }
  }
  std::size_t edges = 0;
  for (int j = 0; j < p; ++j)
    for (const TreePiece& pc : pieces[j]) edges += plan.trees[static_cast<std::size_t>(pc.tree)].edges.size();
  EXPECT_EQ(sent.size(), edges);
  EXPECT_EQ(landed.size(), edges);
  for (const auto& [edge, n] : sent) EXPECT_EQ(n, 1) << std::get<0>(edge) << "->" << std::get<1>(edge);
  for (const auto& [edge, n] : landed) EXPECT_EQ(n, 1);
  // Rank 1's own pieces all leave before its first forward of root 0's.
  int own_left = 4;
  for (const TreeAgStep& st : program) {
    if (st.arrival || st.from != 1) continue;
    if (st.owner == 1) {
      --own_left;
    } else {
      EXPECT_EQ(own_left, 0) << "a forward of root " << st.owner << " before rank 1's own piece";
    }
  }
  EXPECT_EQ(own_left, 0);
  // Without routes every send costs its bytes: the same edges, still a valid program, and the
  // same inputs give the same order.
  TreePlan bare = plan;
  bare.routes.clear();
  const std::vector<TreeAgStep> a = tree_allgather_program(bare, shapes, pieces, 1e4, 1);
  const std::vector<TreeAgStep> b = tree_allgather_program(bare, shapes, pieces, 1e4, 1);
  ASSERT_EQ(a.size(), program.size());
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].arrival, b[i].arrival);
    EXPECT_EQ(std::tie(a[i].from, a[i].to, a[i].owner, a[i].piece, a[i].engine),
              std::tie(b[i].from, b[i].to, b[i].owner, b[i].piece, b[i].engine));
  }
  // Route costs must be one per ordered pair.
  TreePlan short_routes = plan;
  short_routes.routes.pop_back();
  EXPECT_FALSE(validate_tree_plan(short_routes, p).ok());
}

// The dataflow every reduce-scatter program keeps: every rank computes its partial of every
// piece once, adds each child's partial once after its own GEMM of the piece and after that
// child sent it, and sends its complete sum to its parent once (the owner keeps it).
void expect_sums_up_the_trees(const std::vector<TreeRsStep>& program,
                              const std::vector<TreeShape>& shapes,
                              const std::vector<std::vector<TreePiece>>& pieces, int p) {
  using Kind = TreeRsStep::Kind;
  // (rank, owner, piece) -> position of its GEMM / its send; (rank, owner, piece, child) -> add.
  std::map<std::tuple<int, int, int>, std::size_t> gemm_at, sent_at;
  std::map<std::tuple<int, int, int, int>, std::size_t> added_at;
  for (std::size_t k = 0; k < program.size(); ++k) {
    const TreeRsStep& st = program[k];
    const auto key = std::make_tuple(st.rank, st.owner, st.piece);
    const TreePiece& pc = pieces[st.owner][static_cast<std::size_t>(st.piece)];
    const TreeShape& sh = shapes[pc.tree];
    EXPECT_EQ(st.round, pc.chunk + sh.height - sh.depth[st.rank]);
    switch (st.kind) {
      case Kind::gemm:
        EXPECT_TRUE(gemm_at.emplace(key, k).second) << "two GEMMs of one piece, at " << k;
        break;
      case Kind::add:
        ASSERT_EQ(sh.parent[st.peer], st.rank) << "an add from a rank that is not a child";
        EXPECT_TRUE(gemm_at.count(key)) << "an add before the rank's own GEMM, at " << k;
        EXPECT_TRUE(sent_at.count({st.peer, st.owner, st.piece}))
            << "an add before the child sent, at " << k;
        EXPECT_TRUE(added_at.emplace(std::make_tuple(st.rank, st.owner, st.piece, st.peer), k).second);
        break;
      case Kind::send:
        EXPECT_NE(st.rank, st.owner) << "the owner keeps its sum";
        EXPECT_EQ(st.peer, sh.parent[st.rank]);
        EXPECT_TRUE(gemm_at.count(key)) << "a send before the rank's own GEMM, at " << k;
        for (int u : sh.children.of(static_cast<std::size_t>(st.rank)))
          EXPECT_TRUE(added_at.count({st.rank, st.owner, st.piece, u}))
              << "a send before the add of child " << u << ", at " << k;
        EXPECT_TRUE(sent_at.emplace(key, k).second) << "two sends of one sum, at " << k;
        break;
    }
  }
  std::size_t pieces_total = 0;
  for (const auto& pc : pieces) pieces_total += pc.size();
  EXPECT_EQ(gemm_at.size(), pieces_total * p);        // every rank, every piece
  EXPECT_EQ(sent_at.size(), pieces_total * (p - 1));  // every rank but the owner
  EXPECT_EQ(added_at.size(), pieces_total * (p - 1)); // one add per tree edge
}

// Without compute costs (a plan made for no machine) the program goes round by round: a
// round's GEMMs come before its adds and sends.
TEST(CommPlan, UntimedReduceScatterProgramGoesRoundByRound) {
  auto a6000 = hardware::make_preset("a6000x8");
  ASSERT_TRUE(a6000.ok());
  auto plan = comm_plan_for(*a6000, {0, 1, 2, 3, 4, 5, 6, 7});
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  const int p = 8;
  const TreePlan& tp = plan->hier;
  const std::vector<TreeShape> shapes = tree_shapes(tp, p);
  std::vector<std::vector<TreePiece>> pieces(p);
  for (int j = 0; j < p; ++j) pieces[j] = tree_pieces(tp, j, 512, 3);
  const std::vector<TreeRsStep> program = tree_reduce_scatter_program(
      tp, shapes, pieces, 1e4, TreeRsCosts{}, plan->copy_engines);
  expect_sums_up_the_trees(program, shapes, pieces, p);
  int round = 0;
  bool round_has_adds = false;
  for (std::size_t k = 0; k < program.size(); ++k) {
    const TreeRsStep& st = program[k];
    ASSERT_GE(st.round, round) << "rounds go forward, at " << k;
    if (st.round > round) round_has_adds = false;
    round = st.round;
    if (st.kind == TreeRsStep::Kind::gemm)
      EXPECT_FALSE(round_has_adds) << "a GEMM after the round's adds or sends, at " << k;
    else
      round_has_adds = true;
  }
  // Without a group there is no GPU to cost: the order stays untimed.
  const hardware::Profile machine = hardware::make_preset("a6000x8").value();
  const workload::OperatorSpec rs{workload::OpKind::gemm_rs, 4096, 5120, 5120, p, DType::bf16, ""};
  EXPECT_EQ(tree_rs_costs(machine, CommPlan{}, rs), TreeRsCosts{});
  EXPECT_GT(tree_rs_costs(machine, default_comm_plan(p), rs).gemm_row_s, 0.0);
}

// With the machine's costs the program is a list schedule: the same dataflow, and a compute
// stream computes GEMM pieces of later rounds where the round order would wait for a partial
// (a GEMM-heavy reduce-scatter on a6000x8).
TEST(CommPlan, TimedReduceScatterProgramComputesAheadOfPartials) {
  auto a6000 = hardware::make_preset("a6000x8");
  ASSERT_TRUE(a6000.ok());
  auto plan = comm_plan_for(*a6000, {0, 1, 2, 3, 4, 5, 6, 7});
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  const int p = 8;
  const workload::OperatorSpec op{workload::OpKind::gemm_rs, 2048, 5120, 20480, p, DType::bf16, ""};
  const TreeRsCosts costs = tree_rs_costs(*a6000, *plan, op);
  // Per row: the fused kernel's share of the local GEMM, slowed beside the copy engines.
  const workload::GemmShape local = workload::local_gemm(op);
  EXPECT_NEAR(costs.gemm_row_s * static_cast<double>(local.m),
              hardware::fused_chunk_compute_s(*a6000, local.m, local.m, local.n, local.k,
                                              op.dtype, 0) *
                  hardware::gemm_slowdown(*a6000, true, p),
              1e-12);
  EXPECT_GT(costs.add_row_s, 0.0);
  EXPECT_EQ(costs.item_s, a6000->overheads.flag_wait_s);
  const TreePlan& tp = plan->hier;
  const std::vector<TreeShape> shapes = tree_shapes(tp, p);
  std::vector<std::vector<TreePiece>> pieces(p);
  for (int j = 0; j < p; ++j)
    pieces[j] = tree_pieces(tp, j, workload::row_share(op, j).len, 4);
  const double row_bytes = static_cast<double>(op.n) * dtype_bytes(op.dtype);
  const std::vector<TreeRsStep> program =
      tree_reduce_scatter_program(tp, shapes, pieces, row_bytes, costs, plan->copy_engines);
  expect_sums_up_the_trees(program, shapes, pieces, p);
  // Some rank computes a GEMM piece of a later round before an add of an earlier one.
  bool ahead = false;
  std::vector<int> latest_gemm_round(p, -1);
  for (const TreeRsStep& st : program) {
    if (st.kind == TreeRsStep::Kind::gemm)
      latest_gemm_round[st.rank] = std::max(latest_gemm_round[st.rank], st.round);
    else if (st.kind == TreeRsStep::Kind::add && latest_gemm_round[st.rank] > st.round)
      ahead = true;
  }
  EXPECT_TRUE(ahead);
  EXPECT_NE(program, tree_reduce_scatter_program(tp, shapes, pieces, row_bytes, TreeRsCosts{},
                                                 plan->copy_engines));
}

// The property grid's shuffled plans are generated with a machine's costs, so their tree
// reduce-scatters run the list schedule (here it differs from the round order for some shape).
TEST(CommPlan, PropertyGridCoversTheTimedReduceScatterOrder) {
  for (int p : {3, 8}) {
    bool differs = false;
    for (const auto& [name, plan] : testing::plans(p)) {
      if (name != "shuffled") continue;
      const std::vector<TreeShape> shapes = tree_shapes(plan.hier, p);
      for (const workload::OperatorSpec& op : testing::shapes(workload::OpKind::gemm_rs, p)) {
        std::vector<std::vector<TreePiece>> pieces(p);
        for (int j = 0; j < p; ++j)
          pieces[j] = tree_pieces(plan.hier, j, workload::row_share(op, j).len,
                                  tree_chunks(plan.hier, 0));
        const double row_bytes = static_cast<double>(op.n) * dtype_bytes(op.dtype);
        const std::vector<TreeRsStep> timed = tree_reduce_scatter_program(
            plan.hier, shapes, pieces, row_bytes,
            testing::grid_options(name, plan, op).tree_rs_costs, plan.copy_engines);
        expect_sums_up_the_trees(timed, shapes, pieces, p);
        differs = differs || timed != tree_reduce_scatter_program(plan.hier, shapes, pieces,
                                                                  row_bytes, TreeRsCosts{},
                                                                  plan.copy_engines);
      }
    }
    EXPECT_TRUE(differs) << "p = " << p;
  }
}

// generate_for is generate with the machine's costs; a plan naming a GPU the machine lacks is
// an error, not a read past its devices.
TEST(CommPlan, GenerateForPassesTheMachinesCosts) {
  const hardware::Profile a6000 = hardware::make_preset("a6000x8").value();
  const CommPlan plan = comm_plan_for(a6000, {0, 1, 2, 3, 4, 5, 6, 7}).value();
  const workload::OperatorSpec op{workload::OpKind::gemm_rs, 2048, 5120, 20480, 8, DType::bf16, ""};
  const Strategy hier{StrategyKind::fuse_hier, 0};
  GenerateOptions options;
  options.tree_rs_costs = tree_rs_costs(a6000, plan, op);
  auto with_costs = generate(op, hier, plan, options);
  auto for_machine = generate_for(a6000, op, hier, plan);
  auto untimed = generate(op, hier, plan);
  ASSERT_TRUE(with_costs.ok() && for_machine.ok() && untimed.ok());
  EXPECT_EQ(schedule_to_json(*for_machine), schedule_to_json(*with_costs));
  EXPECT_NE(schedule_to_json(*for_machine), schedule_to_json(*untimed));
  const hardware::Profile small = hardware::make_preset("a6000x4").value();
  auto off = generate_for(small, op, hier, plan);
  ASSERT_FALSE(off.ok());
  EXPECT_NE(off.error().message.find("GPU 4 is not on"), std::string::npos) << off.error().message;
  EXPECT_EQ(tree_rs_costs(small, comm_plan_for(a6000, {7, 6}).value(), op), TreeRsCosts{});
}

TEST(CommPlan, BadGroupIsAnError) {
  auto profile = hardware::make_preset("a6000x8");
  ASSERT_TRUE(profile.ok());
  EXPECT_FALSE(comm_plan_for(*profile, {0, 0}).ok());
  EXPECT_FALSE(comm_plan_for(*profile, {0, 99}).ok());
  EXPECT_FALSE(comm_plan_for(*profile, {}).ok());
}

}  // namespace
}  // namespace compass::schedule
