// Property tests over every op x strategy x p x shape x plan: the schedule validates, is
// acyclic, computes the right thing (symbolic execution), orders every hazard, and moves the
// closed-form number of bytes over every sender->receiver pair.

#include <gtest/gtest.h>

#include <cmath>
#include <deque>
#include <map>
#include <random>
#include <set>

#include "schedule_cases.hpp"

namespace compass::schedule {
namespace {

using testing::Case;
using workload::OpKind;

// ------------------------------------------------------------------------------------------
// Symbolic execution. Every buffer row holds a value: either a row of the global input
// (ag_gemm: X row g; gemm_rs/ar: X[g, K-block kb]) or a sum of GEMM products, each product
// named by (global row, rank whose weight block was used). No arithmetic is done: the
// final check is that every output row is exactly the expected multiset of products.

using Term = std::pair<std::int64_t, int>;  // (global row, weight block)

struct RowValue {
  bool defined = false;
  bool product = false;
  std::map<Term, int> terms;
  bool operator==(const RowValue&) const = default;
};

std::string show(const RowValue& v) {
  if (!v.defined) return "<undefined>";
  std::string s = v.product ? "sum{" : "input{";
  for (const auto& [t, n] : v.terms) s += fmt::format("({},{})x{} ", t.first, t.second, n);
  return s + "}";
}

class Interpreter {
 public:
  explicit Interpreter(const Schedule& s) : s_(s) {
    const int p = s.ranks();
    for (const Buffer& b : s.buffers) {
      std::vector<RowValue> rows(static_cast<std::size_t>(b.rows));
      if (b.role == BufferRole::input) {
        EXPECT_EQ(b.name, "x");
        for (std::int64_t t = 0; t < b.rows; ++t) {
          RowValue& v = rows[static_cast<std::size_t>(t)];
          v.defined = true;
          if (s.op.kind == OpKind::ag_gemm) {
            v.terms[{b.rank * (s.op.m / p) + t, -1}] = 1;
          } else {
            v.terms[{t, b.rank}] = 1;
          }
        }
      }
      values_.push_back(std::move(rows));
      writes_.emplace_back(static_cast<std::size_t>(b.rows), 0);
    }
  }

  // Runs one task; returns false (with a test failure) on an ill-formed access.
  void run(const Task& t) {
    const std::string where = fmt::format("task {} '{}'", t.id, t.name);
    for (const Region* r : {&t.src, &t.dst}) {
      const Buffer& b = s_.buffers.at(static_cast<std::size_t>(r->buffer));
      ASSERT_EQ(r->col, 0) << where;
      ASSERT_EQ(r->cols, b.cols) << where << ": regions span whole rows";
      ASSERT_NE(s_.buffers.at(static_cast<std::size_t>(t.dst.buffer)).role, BufferRole::input)
          << where << " writes an input";
      ASSERT_NE(s_.buffers.at(static_cast<std::size_t>(t.dst.buffer)).role, BufferRole::weight)
          << where << " writes a weight";
    }
    std::vector<RowValue> src(static_cast<std::size_t>(t.src.rows));
    for (std::int64_t i = 0; i < t.src.rows; ++i) {
      src[static_cast<std::size_t>(i)] = at(t.src, i);
      ASSERT_TRUE(src[static_cast<std::size_t>(i)].defined)
          << where << " reads undefined row " << t.src.row + i << " of buffer "
          << s_.buffers[static_cast<std::size_t>(t.src.buffer)].name << " of rank "
          << s_.owner(t.src);
    }
    switch (t.kind) {
      case TaskKind::transfer:
      case TaskKind::copy:
        for (std::int64_t i = 0; i < t.dst.rows; ++i)
          set(t.dst, i, src[static_cast<std::size_t>(i)]);
        break;
      case TaskKind::add:
        for (std::int64_t i = 0; i < t.dst.rows; ++i) {
          RowValue v = at(t.dst, i);
          const RowValue& a = src[static_cast<std::size_t>(i)];
          ASSERT_TRUE(v.defined && v.product && a.product) << where << " adds non-partials";
          for (const auto& [term, n] : a.terms) v.terms[term] += n;
          set(t.dst, i, v);
        }
        break;
      case TaskKind::gemm: {
        const Buffer& w = s_.buffers.at(static_cast<std::size_t>(t.b.buffer));
        ASSERT_EQ(w.name, "w") << where;
        ASSERT_EQ(w.role, BufferRole::weight) << where;
        ASSERT_EQ(t.b.row, 0) << where;
        ASSERT_EQ(t.b.rows, w.rows) << where;
        const int block = w.rank;
        for (std::int64_t i = 0; i < t.dst.rows; ++i) {
          const RowValue& a = src[static_cast<std::size_t>(i)];
          ASSERT_FALSE(a.product) << where << " multiplies a partial";
          ASSERT_EQ(a.terms.size(), 1u) << where;
          const Term in = a.terms.begin()->first;
          if (s_.op.kind == OpKind::ag_gemm) {
            ASSERT_EQ(in.second, -1) << where;
          } else {
            ASSERT_EQ(in.second, block)
                << where << " pairs X K-block " << in.second << " with W K-block " << block;
          }
          RowValue v = t.accumulate ? at(t.dst, i) : RowValue{};
          if (t.accumulate) {
            ASSERT_TRUE(v.defined && v.product) << where;
          }
          v.defined = true;
          v.product = true;
          v.terms[{in.first, block}] += 1;
          set(t.dst, i, v);
        }
        break;
      }
    }
  }

  // The output rows must hold exactly the right products, and (ag_gemm) be written once.
  void check_outputs() const {
    const auto& op = s_.op;
    const int p = s_.ranks();
    for (std::size_t bi = 0; bi < s_.buffers.size(); ++bi) {
      const Buffer& b = s_.buffers[bi];
      if (b.role != BufferRole::output) continue;
      for (std::int64_t i = 0; i < b.rows; ++i) {
        RowValue want;
        want.defined = true;
        want.product = true;
        if (op.kind == OpKind::ag_gemm) {
          want.terms[{i, b.rank}] = 1;
          EXPECT_EQ(writes_[bi][static_cast<std::size_t>(i)], 1)
              << "rank " << b.rank << " y row " << i << " written more than once";
        } else {
          const std::int64_t g = op.kind == OpKind::gemm_rs ? b.rank * (op.m / p) + i : i;
          for (int kb = 0; kb < p; ++kb) want.terms[{g, kb}] = 1;
        }
        const RowValue& got = values_[bi][static_cast<std::size_t>(i)];
        EXPECT_EQ(got, want) << "rank " << b.rank << " y row " << i << ": got " << show(got)
                             << " want " << show(want);
        if (got != want) return;  // one message is enough
      }
    }
  }

 private:
  RowValue at(const Region& r, std::int64_t i) const {
    return values_[static_cast<std::size_t>(r.buffer)][static_cast<std::size_t>(r.row + i)];
  }
  void set(const Region& r, std::int64_t i, RowValue v) {
    values_[static_cast<std::size_t>(r.buffer)][static_cast<std::size_t>(r.row + i)] = std::move(v);
    ++writes_[static_cast<std::size_t>(r.buffer)][static_cast<std::size_t>(r.row + i)];
  }

  const Schedule& s_;
  std::vector<std::vector<RowValue>> values_;
  std::vector<std::vector<int>> writes_;
};

using ResourceKey = std::tuple<int, int, int>;
ResourceKey key_of(const Task& t) {
  return {t.resource.rank, static_cast<int>(t.resource.kind), t.resource.index};
}

// An execution order a real machine could produce: a task runs once its deps have finished
// and it is the next task of its resource. seed < 0: always the lowest ready id; otherwise a
// random ready task. Returns an empty vector when it gets stuck (deadlock).
std::vector<int> execution_order(const Schedule& s, int seed) {
  std::map<ResourceKey, std::deque<int>> queues;
  for (const Task& t : s.tasks) queues[key_of(t)].push_back(t.id);
  std::vector<char> done(s.tasks.size(), 0);
  std::mt19937 rng(static_cast<unsigned>(seed < 0 ? 0 : seed));
  std::vector<int> order;
  while (order.size() < s.tasks.size()) {
    std::vector<int> ready;
    for (auto& [k, q] : queues) {
      if (q.empty()) continue;
      const Task& t = s.tasks[static_cast<std::size_t>(q.front())];
      bool ok = true;
      for (int d : t.deps) ok = ok && done[static_cast<std::size_t>(d)];
      if (ok) ready.push_back(t.id);
    }
    if (ready.empty()) return {};
    std::sort(ready.begin(), ready.end());
    const int pick =
        seed < 0 ? ready.front()
                 : ready[std::uniform_int_distribution<std::size_t>(0, ready.size() - 1)(rng)];
    done[static_cast<std::size_t>(pick)] = 1;
    order.push_back(pick);
    queues[key_of(s.tasks[static_cast<std::size_t>(pick)])].pop_front();
  }
  return order;
}

// Reachability over deps + same-resource order, as bitsets (tasks are few hundred at most).
std::vector<std::vector<std::uint64_t>> happens_before(const Schedule& s,
                                                       const std::vector<int>& topo) {
  const std::size_t n = s.tasks.size();
  const std::size_t words = (n + 63) / 64;
  std::vector<std::vector<int>> preds(n);
  std::map<ResourceKey, int> last;
  for (const Task& t : s.tasks) {
    preds[static_cast<std::size_t>(t.id)] = t.deps;
    auto it = last.find(key_of(t));
    if (it != last.end()) preds[static_cast<std::size_t>(t.id)].push_back(it->second);
    last[key_of(t)] = t.id;
  }
  std::vector<std::vector<std::uint64_t>> before(n, std::vector<std::uint64_t>(words, 0));
  for (int v : topo) {
    auto& bv = before[static_cast<std::size_t>(v)];
    for (int u : preds[static_cast<std::size_t>(v)]) {
      const auto& bu = before[static_cast<std::size_t>(u)];
      for (std::size_t w = 0; w < words; ++w) bv[w] |= bu[w];
      bv[static_cast<std::size_t>(u) / 64] |= 1ull << (static_cast<std::size_t>(u) % 64);
    }
  }
  return before;
}

bool overlaps(const Region& a, const Region& b) {
  return a.buffer == b.buffer && a.row < b.row + b.rows && b.row < a.row + a.rows &&
         a.col < b.col + b.cols && b.col < a.col + a.cols;
}

// Closed-form elements each sender sends each receiver.
std::map<std::pair<int, int>, std::int64_t> expected_link_elements(const Case& c) {
  const auto& op = c.op;
  const int p = op.tp;
  std::map<std::pair<int, int>, std::int64_t> want;
  if (p == 1) return want;
  auto len = [&](int j) { return op.m * (j + 1) / p - op.m * j / p; };
  auto half = [&](std::int64_t l, int h) { return h == 0 ? (l + 1) / 2 : l / 2; };
  auto pos = [&](const std::vector<int>& ring, int r) {
    return static_cast<int>(std::find(ring.begin(), ring.end(), r) - ring.begin());
  };
  auto succ = [&](const std::vector<int>& ring, int r) {
    return ring[static_cast<std::size_t>((pos(ring, r) + 1) % p)];
  };
  const bool ag = op.kind == OpKind::ag_gemm;
  const bool ar = op.kind == OpKind::gemm_ar;
  const std::int64_t width = ag ? op.k : op.n;
  switch (c.strategy.kind) {
    case StrategyKind::sequential:
    case StrategyKind::decompose:
    case StrategyKind::fuse_ring:
      for (int r = 0; r < p; ++r) {
        const int to = succ(c.plan().ring, r);
        // ring all-gather: everything but the receiver's own shard; ring reduce-scatter:
        // every chunk but the sender's own; gemm_ar does both.
        std::int64_t rows = ag ? op.m - len(to) : op.m - len(r);
        if (ar) rows += op.m - len(to);
        want[{r, to}] += rows * width;
      }
      break;
    case StrategyKind::fuse_all2all:
      for (int r = 0; r < p; ++r)
        for (int j = 0; j < p; ++j) {
          if (j == r) continue;
          std::int64_t rows = ag ? len(r) : len(j);
          if (ar) rows += len(r);
          want[{r, j}] += rows * width;
        }
      break;
    case StrategyKind::fuse_double_ring:
      for (int h = 0; h < 2; ++h) {
        const auto& ring = h == 0 ? c.plan().ring : c.plan().ring2;
        for (int r = 0; r < p; ++r) {
          const int to = succ(ring, r);
          std::int64_t rows = 0;
          for (int j = 0; j < p; ++j) {
            if (ag && j != to) rows += half(len(j), h);
            if (!ag && j != r) rows += half(len(j), h);
            if (ar && j != to) rows += half(len(j), h);
          }
          want[{r, to}] += rows * width;
        }
      }
      break;
    case StrategyKind::fuse_hier:
    case StrategyKind::fuse_synth: {
      // Every tree edge carries the tree's rows of its root's shard/chunk (share of the rows by
      // cumulative rounding, the last tree of a root takes the rest): down the edge for an
      // all-gather, up it for a reduce-scatter, both for gemm_ar.
      const TreePlan& tp = c.strategy.kind == StrategyKind::fuse_hier ? c.plan().hier : c.plan().synth;
      for (int j = 0; j < p; ++j) {
        const std::int64_t total = ag ? op.m / p : len(j);
        std::vector<const RankTree*> mine;
        for (const RankTree& t : tp.trees)
          if (t.root == j) mine.push_back(&t);
        double cum = 0;
        std::int64_t off = 0;
        for (std::size_t i = 0; i < mine.size(); ++i) {
          cum += mine[i]->share;
          const std::int64_t end =
              i + 1 == mine.size() ? total : static_cast<std::int64_t>(std::llround(cum * total));
          const std::int64_t rows = end - off;
          off = end;
          for (auto [a, b] : mine[i]->edges) {
            if (ag || ar) want[{a, b}] += rows * width;
            if (!ag) want[{b, a}] += rows * width;
          }
        }
      }
      break;
    }
  }
  for (auto it = want.begin(); it != want.end();) it = it->second == 0 ? want.erase(it) : ++it;
  return want;
}

class ScheduleProperties : public ::testing::TestWithParam<Case> {};

TEST_P(ScheduleProperties, ValidAcyclicCorrectHazardFreeAndClosedFormBytes) {
  const Case& c = GetParam();
  auto r = generate(c.op, c.strategy, c.plan(), c.options());
  if (!testing::feasible(c.op, c.strategy)) {
    ASSERT_FALSE(r.ok()) << c.label();
    EXPECT_NE(r.error().message.find(fmt::format("decompose:{}", c.strategy.parts)),
              std::string::npos)
        << r.error().message;
    return;
  }
  ASSERT_TRUE(r.ok()) << c.label() << ": " << r.error().message;
  const Schedule& s = *r;
  ASSERT_TRUE(validate(s).ok()) << validate(s).error().message;
  EXPECT_EQ(s.ranks(), c.op.tp);
  EXPECT_EQ(s.gpus, c.plan().gpus);

  // Acyclic, explicitly: some execution completes (no deadlock) and deps point backwards in it.
  const std::vector<int> topo = execution_order(s, -1);
  ASSERT_EQ(topo.size(), s.tasks.size()) << "deadlock in " << c.label();

  // Dataflow in several legal execution orders.
  for (int seed : {-1, 1, 2, 3}) {
    const std::vector<int> order = execution_order(s, seed);
    ASSERT_EQ(order.size(), s.tasks.size());
    Interpreter in(s);
    for (int id : order) {
      in.run(s.tasks[static_cast<std::size_t>(id)]);
      if (HasFatalFailure() || HasNonfatalFailure()) FAIL() << c.label() << " order seed " << seed;
    }
    in.check_outputs();
    if (HasNonfatalFailure()) FAIL() << c.label() << " order seed " << seed;
  }

  // Hazards: conflicting accesses to overlapping regions are ordered.
  const auto before = happens_before(s, topo);
  auto ordered = [&](int a, int b) {
    auto bit = [&](int x, int y) {
      return (before[static_cast<std::size_t>(x)][static_cast<std::size_t>(y) / 64] >>
              (static_cast<std::size_t>(y) % 64)) &
             1ull;
    };
    return bit(a, b) || bit(b, a);
  };
  struct Access {
    int task;
    Region region;
    bool write;
  };
  std::map<int, std::vector<Access>> by_buffer;
  for (const Task& t : s.tasks) {
    by_buffer[t.src.buffer].push_back({t.id, t.src, false});
    if (t.kind == TaskKind::gemm) by_buffer[t.b.buffer].push_back({t.id, t.b, false});
    by_buffer[t.dst.buffer].push_back({t.id, t.dst, true});
  }
  for (const auto& [buf, list] : by_buffer)
    for (std::size_t i = 0; i < list.size(); ++i)
      for (std::size_t j = i + 1; j < list.size(); ++j) {
        const Access& a = list[i];
        const Access& b = list[j];
        if (a.task == b.task || !(a.write || b.write) || !overlaps(a.region, b.region)) continue;
        ASSERT_TRUE(ordered(a.task, b.task))
            << c.label() << ": unordered hazard on buffer "
            << s.buffers[static_cast<std::size_t>(buf)].name << " of rank "
            << s.buffers[static_cast<std::size_t>(buf)].rank << " between '"
            << s.tasks[static_cast<std::size_t>(a.task)].name << "' and '"
            << s.tasks[static_cast<std::size_t>(b.task)].name << "'";
      }

  // Bytes per sender->receiver pair.
  std::map<std::pair<int, int>, std::int64_t> got;
  for (const Task& t : s.tasks) {
    if (t.kind != TaskKind::transfer) continue;
    EXPECT_EQ(t.resource.kind, ResourceKind::copy_engine);
    EXPECT_LT(t.resource.index, c.plan().copy_engines);
    EXPECT_EQ(task_bytes(s, t), t.src.elements() * 2);
    const int from = s.owner(t.src);
    const int to = s.owner(t.dst);
    EXPECT_NE(from, to) << t.name << " is a transfer to itself";
    got[{from, to}] += t.src.elements();
    if (c.strategy.kind == StrategyKind::fuse_double_ring) {
      EXPECT_TRUE(t.channel == 0 || t.channel == 1) << t.name;
      EXPECT_EQ(t.resource.index, t.channel == 1 && c.plan().copy_engines >= 2 ? 1 : 0) << t.name;
    }
  }
  EXPECT_EQ(got, expected_link_elements(c)) << c.label();

  // GEMM flops add up to the whole operator (every output product computed exactly once).
  double flops = 0;
  for (const Task& t : s.tasks) flops += task_flops(t, s);
  EXPECT_DOUBLE_EQ(flops, 2.0 * static_cast<double>(c.op.m) * static_cast<double>(c.op.n) *
                              static_cast<double>(c.op.k))
      << c.label();

  // JSON round trip.
  auto back = schedule_from_json(schedule_to_json(s));
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_TRUE(*back == s) << c.label();
}

INSTANTIATE_TEST_SUITE_P(Grid, ScheduleProperties, ::testing::ValuesIn(testing::all_cases()),
                         testing::case_name);

}  // namespace
}  // namespace compass::schedule
