#include "compass/schedule/collective_program.hpp"

#include <algorithm>

namespace compass::schedule {

namespace {

using Role = CollectiveProgram::Role;
using Step = CollectiveProgram::Step;
using workload::OpKind;

// Builds the steps in emitted order, each ring step's sends knowing what they wait for.
class ProgramBuilder {
 public:
  ProgramBuilder(const workload::OperatorSpec& op, const CommPlan& plan, int d)
      : op_(op), p_(op.tp), d_(d), ring_(plan.ring), pos_(static_cast<std::size_t>(op.tp), 0) {
    for (int i = 0; i < p_; ++i) pos_[static_cast<std::size_t>(ring_[i])] = i;
    // At most, per part and rank: a GEMM, two copies, and two ring collectives' sends and adds.
    const std::size_t most = static_cast<std::size_t>(d_) * p_ * (3 * p_ + 3);
    out_.steps.reserve(most);
    out_.follow.reserve(most);
  }

  CollectiveProgram ag() {
    const std::int64_t q = workload::shard_rows(op_) / d_;
    const bool staged = d_ > 1 && p_ > 1;
    std::vector<int> own(static_cast<std::size_t>(p_), -1);
    for (int i = 0; i < d_; ++i) {
      std::vector<int> last(static_cast<std::size_t>(p_), -1);  // the last arrival per rank
      if (p_ > 1) {
        for (int r = 0; r < p_; ++r)
          own[r] = add(Step{.role = Role::copy_own, .rank = r, .part = i, .rows = q});
        last = ring_allgather(
            i, 0, [&](int, int) { return q; }, [](int) { return -1; });
      }
      for (int r = 0; r < p_; ++r) {
        add(Step{.role = Role::gemm,
                 .rank = r,
                 .part = i,
                 .rows = p_ * q,
                 .waits = {p_ > 1 ? own[r] : -1, last[r]}});
        if (staged)
          add(Step{.role = Role::copy_out, .rank = r, .part = i, .copies = p_, .rows = q});
      }
    }
    // The collectives first, then the GEMMs and their copies, each in emitted order.
    for (int k = 0; k < size(); ++k)
      if (CollectiveProgram::on_copy_engine(out_.steps[k].role)) out_.follow.push_back(k);
    for (int k = 0; k < size(); ++k)
      if (!CollectiveProgram::on_copy_engine(out_.steps[k].role)) out_.follow.push_back(k);
    return std::move(out_);
  }

  CollectiveProgram rs() {
    const bool ar = op_.kind == OpKind::gemm_ar;
    if (p_ == 1) {
      for (int i = 0; i < d_; ++i)
        add(Step{.role = Role::gemm, .rank = 0, .part = i, .rows = op_.m / d_});
      for (int k = 0; k < size(); ++k) out_.follow.push_back(k);
      return std::move(out_);
    }
    const bool staged = d_ > 1;
    // With d == 1 chunks may be uneven (gemm_ar with p not dividing M); with d > 1 they are not.
    const std::int64_t q = staged ? workload::shard_rows(op_) / d_ : 0;
    auto len = [&](int j) { return staged ? q : workload::row_share(op_, j).len; };
    std::vector<int> gemm(static_cast<std::size_t>(d_) * p_, -1);
    auto gemm_part = [&](int i) {
      for (int r = 0; r < p_; ++r) {
        if (staged) add(Step{.role = Role::copy_in, .rank = r, .part = i, .copies = p_, .rows = q});
        gemm[static_cast<std::size_t>(i) * p_ + r] =
            add(Step{.role = Role::gemm, .rank = r, .part = i, .rows = staged ? p_ * q : op_.m});
      }
    };
    // Where each part's step-0 sends are followed: before the GEMMs emitted ahead of them.
    std::vector<int> insert_at(static_cast<std::size_t>(d_), 0);
    std::vector<std::pair<int, int>> first_sends(static_cast<std::size_t>(d_));
    gemm_part(0);
    for (int i = 0; i < d_; ++i) {
      insert_at[i] = size();
      if (i + 1 < d_) gemm_part(i + 1);
      // The own block's partial is copied into the output unless it is computed there
      // (unstaged GEMM-AR computes its partials in the output).
      if (staged || !ar)
        for (int r = 0; r < p_; ++r)
          add(Step{.role = Role::copy_partial, .rank = r, .part = i, .rows = len(r)});
      std::vector<int> sum(static_cast<std::size_t>(p_), -1);  // per rank: its last add
      for (int s = 0; s + 1 < p_; ++s) {
        const int first = size();
        std::vector<int> sent(static_cast<std::size_t>(p_));
        for (int r = 0; r < p_; ++r) {
          const int j = at(pos(r) - s - 1);
          sent[r] = add(
              Step{.role = Role::send,
                   .rank = r,
                   .part = i,
                   .ring_step = s,
                   .chunk = j,
                   .rows = len(j),
                   .waits = {s == 0 ? gemm[static_cast<std::size_t>(i) * p_ + r] : sum[r], -1}});
        }
        if (s == 0) first_sends[i] = {first, size()};
        for (int t = 0; t < p_; ++t) {
          const int j = at(pos(t) - s - 2);  // the block t received at this step
          sum[t] = add(Step{.role = Role::add,
                            .rank = t,
                            .part = i,
                            .ring_step = s,
                            .chunk = j,
                            .rows = len(j),
                            .waits = {sent[at(pos(t) - 1)], -1}});
        }
      }
      if (ar)
        ring_allgather(
            i, 1, [&](int, int o) { return len(o); }, [&](int r) { return sum[r]; });
    }
    std::vector<char> moved(out_.steps.size(), 0);
    for (const auto& [from, to] : first_sends)
      std::fill(moved.begin() + from, moved.begin() + to, 1);
    for (int i = 0, k = 0; k <= size(); ++k) {
      for (; i < d_ && insert_at[i] == k; ++i)
        for (int f = first_sends[i].first; f < first_sends[i].second; ++f) out_.follow.push_back(f);
      if (k < size() && !moved[k]) out_.follow.push_back(k);
    }
    return std::move(out_);
  }

 private:
  int size() const { return static_cast<int>(out_.steps.size()); }
  int add(Step s) {
    out_.steps.push_back(s);
    return size() - 1;
  }
  int at(int position) const {
    return ring_[static_cast<std::size_t>(((position % p_) + p_) % p_)];
  }
  int pos(int rank) const { return pos_[static_cast<std::size_t>(rank)]; }

  // The ring all-gather of part i in `phase`: at step s the rank at position P forwards the
  // block of rank ring[P - s] (its own at step 0, once `first(r)` has ended) to its successor.
  // Returns per rank the step bringing its last block.
  template <typename Rows, typename First>
  std::vector<int> ring_allgather(int i, int phase, const Rows& rows, const First& first) {
    std::vector<int> prev(static_cast<std::size_t>(p_), -1), cur(static_cast<std::size_t>(p_));
    for (int s = 0; s + 1 < p_; ++s) {
      for (int r = 0; r < p_; ++r) {
        const int o = at(pos(r) - s);
        cur[r] = add(Step{.role = Role::send,
                          .rank = r,
                          .part = i,
                          .phase = phase,
                          .ring_step = s,
                          .chunk = o,
                          .rows = rows(r, o),
                          .waits = {s == 0 ? first(r) : prev[at(pos(r) - 1)], -1}});
      }
      prev = cur;
    }
    // Rank r's last block arrives from its predecessor.
    std::vector<int> last(static_cast<std::size_t>(p_));
    for (int r = 0; r < p_; ++r) last[r] = prev[at(pos(r) - 1)];
    return last;
  }

  const workload::OperatorSpec& op_;
  int p_, d_;
  const std::vector<int>& ring_;
  std::vector<int> pos_;
  CollectiveProgram out_;
};

}  // namespace

CollectiveProgram collective_program(const workload::OperatorSpec& op, const Strategy& strategy,
                                     const CommPlan& plan) {
  COMPASS_CHECK(
      strategy.kind == StrategyKind::sequential || strategy.kind == StrategyKind::decompose,
      "collective_program: {} has no collective program", to_string(strategy));
  const int d = strategy.kind == StrategyKind::decompose ? strategy.parts : 1;
  ProgramBuilder b(op, plan, d);
  return op.kind == OpKind::ag_gemm ? b.ag() : b.rs();
}

}  // namespace compass::schedule
