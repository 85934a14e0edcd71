#include "compass/model/program.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "compass/core/tournament.hpp"
#include "compass/hardware/gemm_cost.hpp"
#include "compass/hardware/task_costs.hpp"

namespace compass::model::detail {

using Item = FusedProgram::Item;
using Send = FusedProgram::Send;

namespace {

// GEMM and add work of the busiest rank, each rank's items summed in program order.
double busiest_work_s(const std::vector<std::vector<Item>>& items) {
  double most = 0;
  for (const std::vector<Item>& rank : items) {
    double work = 0;
    for (const Item& it : rank) work += it.work;
    most = std::max(most, work);
  }
  return most;
}

}  // namespace

FusedProgram price_program(const schedule::Program& pr, const hardware::Profile& prof,
                           const workload::OperatorSpec& op, int gpu) {
  const workload::GemmShape s = workload::local_gemm(op);
  const double row_bytes = schedule::program_row_bytes(op);
  // A program has few distinct sizes (a shard, its halves, tree pieces): price each once.
  std::vector<std::pair<std::int64_t, double>> gemms, adds;
  auto priced = [](std::vector<std::pair<std::int64_t, double>>& known, std::int64_t rows,
                   auto&& cost) {
    for (const auto& [r, t] : known)
      if (r == rows) return t;
    known.emplace_back(rows, cost(rows));
    return known.back().second;
  };
  FusedProgram out;
  out.items.resize(pr.items.size());
  for (std::size_t v = 0; v < pr.items.size(); ++v) {
    out.items[v].reserve(pr.items[v].size());
    for (const schedule::Program::Item& it : pr.items[v]) {
      const double work =
          it.add ? priced(adds, it.rows,
                          [&](std::int64_t r) {
                            return hardware::add_s(prof, gpu, static_cast<double>(r) * row_bytes);
                          })
                 : priced(gemms, it.rows, [&](std::int64_t r) {
                     return hardware::fused_chunk_compute_s(prof, r, op.m, s.n, s.k, op.dtype, gpu);
                   });
      out.items[v].push_back(Item{it.add, work, it.flow_in});
    }
  }
  out.sends = pr.sends;
  return out;
}

FusedProgram reprice_program(const FusedProgram& prepared, const schedule::Program& pr,
                             const hardware::Profile& prof, const workload::OperatorSpec& op,
                             int gpu) {
  FusedProgram out = prepared;
  out.items = price_program(pr, prof, op, gpu).items;
  out.work_s = busiest_work_s(out.items);
  return out;
}

FollowCosts fused_follow_costs(const hardware::Profile& prof, int p, bool overheads,
                               bool interference) {
  FollowCosts c;
  if (overheads) {
    c.launch = prof.overheads.kernel_launch_s;
    c.copy_issue = prof.overheads.copy_launch_s;
    c.flag_wait = prof.overheads.flag_wait_s;
  }
  if (interference && p > 1) {
    c.fg = hardware::gemm_slowdown(prof, true, p);
    c.fc = prof.interference.comm_slowdown_beside_gemm;
  }
  return c;
}

void prepare_program(FusedProgram& pr, const hardware::Profile& prof, const std::vector<int>& gpus,
                     double row_bytes) {
  const int p = static_cast<int>(pr.items.size());
  const std::size_t nf = pr.sends.size();
  pr.cap = hardware::sharing::dir_capacities(prof);
  pr.flows.assign(nf, FusedProgram::Flow{});
  pr.paths = hardware::sharing::FlatPaths{};
  // Routes once per (sender, receiver) pair.
  std::vector<int> pair_flow(static_cast<std::size_t>(p) * p, -1);
  for (std::size_t f = 0; f < nf; ++f) {
    const Send& sd = pr.sends[f];
    FusedProgram::Flow& fl = pr.flows[f];
    fl.bytes = static_cast<double>(sd.rows) * row_bytes;
    fl.moves = sd.from != sd.to && gpus[sd.from] != gpus[sd.to];
    fl.waits = (sd.ready_item >= 0) + (sd.dep_flow >= 0) + (sd.after >= 0);
    int& same = pair_flow[static_cast<std::size_t>(sd.from) * p + sd.to];
    if (same >= 0) {
      const auto from = static_cast<std::size_t>(pr.paths.offset[same]);
      const auto to = static_cast<std::size_t>(pr.paths.offset[same + 1]);
      for (std::size_t d = from; d < to; ++d) pr.paths.dirs.push_back(pr.paths.dirs[d]);
      fl.latency_s = pr.flows[same].latency_s;
    } else if (fl.moves) {
      const int src = gpus[sd.from], dst = gpus[sd.to];
      hardware::sharing::append_route_dirs(prof, src, dst, pr.paths.dirs);
      fl.latency_s = prof.route_latency_s(src, dst);
      same = static_cast<int>(f);
    }
    pr.paths.offset.push_back(static_cast<int>(pr.paths.dirs.size()));
  }
  pr.item_base.assign(static_cast<std::size_t>(p) + 1, 0);
  for (int v = 0; v < p; ++v) pr.item_base[v + 1] = pr.item_base[v] + pr.items[v].size();
  pr.work_s = busiest_work_s(pr.items);
  std::vector<std::pair<int, int>> flow_waits, item_on_flow, flow_on_item;
  for (std::size_t f = 0; f < nf; ++f) {
    const Send& sd = pr.sends[f];
    for (int g : {sd.after, sd.dep_flow})
      if (g >= 0) flow_waits.emplace_back(g, static_cast<int>(f));
    if (sd.ready_item >= 0)
      flow_on_item.emplace_back(static_cast<int>(pr.item_base[sd.from] + sd.ready_item),
                                static_cast<int>(f));
  }
  for (int v = 0; v < p; ++v)
    for (const Item& it : pr.items[v])
      if (it.flow_in >= 0) item_on_flow.emplace_back(it.flow_in, v);
  pr.flow_waiters = FusedProgram::Lists(nf, flow_waits);
  pr.item_waiters = FusedProgram::Lists(nf, item_on_flow);
  pr.send_waiters = FusedProgram::Lists(pr.item_base.back(), flow_on_item);
}

namespace {

// follow_program's state and events (program.hpp).
class Follower {
 public:
  Follower(const FusedProgram& pr, const FollowCosts& c, bool work,
           hardware::sharing::IncrementalMaxmin& sharing, FollowedTimes* times)
      : pr_(pr),
        c_(c),
        work_(work),
        instant_(!work && c.launch == 0 && c.flag_wait == 0),
        sharing_(sharing),
        times_(times),
        flows_(pr.sends.size()),
        ranks_(pr.items.size()),
        compute_(pr.items.size()) {
    for (std::size_t f = 0; f < flows_.size(); ++f) flows_[f].pending = pr.flows[f].waits;
    // Each transfer is in each of its queues at most once. Sized once, the heaps do not grow
    // while following.
    releases_.reserve(flows_.size());
    joins_.reserve(flows_.size());
    if (times_ != nullptr) {
      times_->send_start_s.assign(flows_.size(), 0.0);
      times_->send_end_s.assign(flows_.size(), 0.0);
      times_->item_start_s.assign(pr.item_base.back(), 0.0);
      times_->item_end_s.assign(pr.item_base.back(), 0.0);
    }
  }

  Followed run() {
    Followed out;
    out.work_s = work_ ? pr_.work_s : 0.0;
    sharing_.reset(pr_.cap, pr_.paths);
    for (std::size_t f = 0; f < flows_.size(); ++f)
      if (flows_[f].pending == 0) release(static_cast<int>(f));
    for (std::size_t v = 0; v < ranks_.size(); ++v) next_item(static_cast<int>(v));
    constexpr double kInf = std::numeric_limits<double>::infinity();
    double now = 0;
    const std::size_t limit = 16 * (flows_.size() + pr_.item_base.back()) + 16;
    for (std::size_t step = 0; step < limit && !broken_; ++step) {
      const double t = std::min({top(releases_), top(joins_), compute_.time(), next_end_});
      if (t == kInf) break;
      now = std::max(now, t);
      // At one instant: last bytes, then landings, then the bytes of transfers whose latency
      // has passed, then compute (a GEMM ending now is no longer running, one beginning now
      // is), then the transfers that start.
      if (next_end_ <= now) {
        // advance(now) and the scan for finished transfers in one pass.
        const double dt = now - clock_;
        clock_ = now;
        ended_.clear();
        for (int f : sharing_.active()) {
          Flow& fl = flows_[f];
          if (dt > 0) fl.remaining -= fl.rate * dt;
          if (fl.remaining <= 1e-9 * fl.sized) ended_.push_back(f);
        }
        std::sort(ended_.begin(), ended_.end());  // in transfer order (active() has none)
        for (int f : ended_) sharing_.remove(f);
        for (int f : ended_) land(f, now);
        reshare_ = true;
      }
      while (top(joins_) <= now) join(pop(joins_).second, now);
      while (compute_.time() <= now) {
        const int v = static_cast<int>(compute_.index());
        const double at = compute_.time();
        compute_.set(static_cast<std::size_t>(v), kInf);
        on_compute(v, at);
      }
      while (top(releases_) <= now + 1e-15) start(pop(releases_).second, now);
      if (reshare_) {
        reshare_ = false;
        next_end_ = kInf;
        const std::vector<double>& rate = sharing_.rates();
        for (int f : sharing_.active()) {
          flows_[f].rate = rate[f];
          if (rate[f] > 0) next_end_ = std::min(next_end_, now + flows_[f].remaining / rate[f]);
        }
      }
    }
    bool finished = !broken_;
    for (const Flow& fl : flows_) {
      finished = finished && fl.landed;
      out.end_s = std::max(out.end_s, fl.landed_s);
    }
    for (const Rank& r : ranks_) {
      finished = finished && r.phase == Phase::done;
      out.end_s = std::max(out.end_s, r.prev_end);
    }
    if (!finished) out.end_s = std::numeric_limits<double>::quiet_NaN();
    return out;
  }

 private:
  enum class Phase { waiting, overhead, gemm, add, done };
  // One transfer's state.
  struct Flow {
    double sized = 0, remaining = 0, rate = 0;  // its bytes (fc included), left, current rate
    double ready_s = 0;   // the latest of what it waits for, once known
    double landed_s = 0;
    int pending = 0;      // what it waits for and has not happened yet
    bool landed = false;
  };
  // One compute stream's state.
  struct Rank {
    std::size_t item = 0;
    Phase phase = Phase::waiting;
    bool launched = false;  // its first GEMM piece has paid the launch
    double prev_end = 0;    // the end of its previous item
    double left = 0, since = 0;  // the running GEMM's work left at `since`
    int sending = 0;             // its transfers under way (started, not landed)
  };
  using Queue = std::vector<std::pair<double, int>>;  // a min-heap of (time, id)

  struct Later {  // orders the min-heaps
    bool operator()(const std::pair<double, int>& a, const std::pair<double, int>& b) const {
      return a > b;
    }
  };
  static double top(const Queue& q) {
    return q.empty() ? std::numeric_limits<double>::infinity() : q.front().first;
  }
  static std::pair<double, int> pop(Queue& q) {
    std::pop_heap(q.begin(), q.end(), Later{});
    const std::pair<double, int> e = q.back();
    q.pop_back();
    return e;
  }
  void push(Queue& q, double at, int id) {
    if (std::isnan(at)) {  // a cost that is not a number: the program never finishes
      broken_ = true;
      return;
    }
    q.emplace_back(at, id);
    std::push_heap(q.begin(), q.end(), Later{});
  }
  double work_of(const Item& it) const { return work_ ? it.work : 0.0; }
  bool gemm_running(int v) const { return ranks_[v].phase == Phase::gemm; }
  // Rank v's one compute event is now at `at`, replacing the one it had.
  void push_compute(int v, double at) {
    if (std::isnan(at)) broken_ = true;  // a cost that is not a number: it never finishes
    compute_.set(static_cast<std::size_t>(v), at);
  }
  // Brings the moving transfers' remaining bytes to `now` (their rates held since the last
  // change of the sharing).
  void advance(double now) {
    const double dt = now - clock_;
    if (dt > 0)
      for (int f : sharing_.active()) flows_[f].remaining -= flows_[f].rate * dt;
    clock_ = now;
  }
  // A rank's transfers under way change: its running GEMM's speed may change with them.
  void sending(int v, int delta, double now) {
    Rank& r = ranks_[v];
    const bool was = r.sending > 0;
    r.sending += delta;
    if (was == (r.sending > 0) || r.phase != Phase::gemm || c_.fg == 1.0) return;
    r.left = std::max(0.0, r.left - (was ? (now - r.since) / c_.fg : now - r.since));
    r.since = now;
    push_compute(v, now + (r.sending > 0 ? r.left * c_.fg : r.left));
  }
  // Everything a transfer waits for has happened: it leaves one copy issue later.
  void release(int f) {
    if (times_ != nullptr) times_->send_start_s[f] = flows_[f].ready_s;
    push(releases_, flows_[f].ready_s + c_.copy_issue, f);
  }
  void resolved(int f, double at) {
    Flow& fl = flows_[f];
    fl.ready_s = std::max(fl.ready_s, at);
    if (--fl.pending == 0) release(f);
  }
  void start(int f, double now) {
    Flow& fl = flows_[f];
    const Send& sd = pr_.sends[f];
    fl.sized = pr_.flows[f].bytes * (gemm_running(sd.from) || gemm_running(sd.to) ? c_.fc : 1.0);
    if (!pr_.flows[f].moves || !(fl.sized > 0)) {
      land(f, now);  // moves nothing: lands the moment it starts
      return;
    }
    sending(sd.from, +1, now);
    // Its route's latency first, then its bytes (the simulator's order).
    if (pr_.flows[f].latency_s > 0)
      push(joins_, now + pr_.flows[f].latency_s, f);
    else
      join(f, now);
  }
  // A transfer's latency has passed: its bytes join the links' sharing.
  void join(int f, double now) {
    Flow& fl = flows_[f];
    advance(now);
    fl.remaining = fl.sized;
    sharing_.add(f);
    reshare_ = true;
  }
  void land(int f, double now) {
    Flow& fl = flows_[f];
    fl.landed = true;
    fl.landed_s = now;
    if (times_ != nullptr) times_->send_end_s[f] = now;
    if (pr_.flows[f].moves && fl.sized > 0) sending(pr_.sends[f].from, -1, now);
    for (int w : pr_.flow_waiters.of(static_cast<std::size_t>(f))) resolved(w, now);
    for (int v : pr_.item_waiters.of(static_cast<std::size_t>(f))) {
      Rank& r = ranks_[v];
      if (r.phase == Phase::waiting && r.item < pr_.items[v].size() &&
          pr_.items[v][r.item].flow_in == f && begin_item(v, std::max(r.prev_end, now)))
        next_item(v);
    }
  }
  // The rank's next items, as long as what they wait for has landed and each ends as it
  // begins.
  void next_item(int v) {
    Rank& r = ranks_[v];
    for (;;) {
      if (r.item >= pr_.items[v].size()) {
        r.phase = Phase::done;
        return;
      }
      const Item& it = pr_.items[v][r.item];
      if (it.flow_in >= 0 && !flows_[it.flow_in].landed) {
        r.phase = Phase::waiting;
        return;
      }
      if (!begin_item(
              v, it.flow_in >= 0 ? std::max(r.prev_end, flows_[it.flow_in].landed_s) : r.prev_end))
        return;
    }
  }
  // Begins the rank's current item at `ready`; true when it ended there (instant_). The rank
  // has no compute event then: its previous item's last one has been taken, or it was waiting.
  bool begin_item(int v, double ready) {
    Rank& r = ranks_[v];
    const Item& it = pr_.items[v][r.item];
    if (times_ != nullptr) times_->item_start_s[pr_.item_base[v] + r.item] = ready;
    if (instant_) {
      // No work and no overheads: the item ends as it begins (`ready` is the instant being
      // followed), where its events would end it later at the same instant; nothing it
      // touches reads which of the instant's events comes first.
      r.launched = r.launched || !it.add;
      end_item(v, ready);
      return true;
    }
    if (it.add) {
      r.phase = Phase::add;
      push_compute(v, ready + c_.flag_wait + work_of(it));
    } else {
      r.phase = Phase::overhead;
      push_compute(v, ready + (r.launched ? c_.flag_wait : c_.launch));
      r.launched = true;
    }
    return false;
  }
  void on_compute(int v, double now) {
    Rank& r = ranks_[v];
    if (r.phase == Phase::overhead) {
      const double work = work_of(pr_.items[v][r.item]);
      r.phase = Phase::gemm;
      r.left = work;
      r.since = now;
      push_compute(v, r.sending > 0 && c_.fg != 1.0 ? now + work * c_.fg : now + work);
      return;
    }
    end_item(v, now);
    next_item(v);
  }
  // A GEMM piece or an add ends (the rank's next item not yet begun).
  void end_item(int v, double now) {
    Rank& r = ranks_[v];
    r.prev_end = now;
    if (times_ != nullptr) times_->item_end_s[pr_.item_base[v] + r.item] = now;
    for (int f : pr_.send_waiters.of(pr_.item_base[v] + r.item)) resolved(f, now);
    ++r.item;
  }

  const FusedProgram& pr_;
  const FollowCosts& c_;
  bool work_;
  bool instant_;  // items take no time: each ends as it begins
  hardware::sharing::IncrementalMaxmin& sharing_;
  FollowedTimes* times_;
  std::vector<Flow> flows_;
  std::vector<Rank> ranks_;
  Queue releases_, joins_;
  EarliestTime compute_;  // per rank: its one compute event (infinity: none)
  std::vector<int> ended_;
  double clock_ = 0, next_end_ = std::numeric_limits<double>::infinity();
  bool reshare_ = false, broken_ = false;
};

}  // namespace

Followed follow_program(const FusedProgram& pr, const FollowCosts& costs, bool work,
                        hardware::sharing::IncrementalMaxmin& sharing, FollowedTimes* times) {
  return Follower(pr, costs, work, sharing, times).run();
}

}  // namespace compass::model::detail
