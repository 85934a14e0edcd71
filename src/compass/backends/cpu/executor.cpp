#include "compass/backends/cpu/executor.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <map>
#include <mutex>
#include <new>
#include <optional>
#include <stdexcept>
#include <stop_token>
#include <system_error>
#include <thread>
#include <tuple>

#include "compass/backends/cpu/blas.hpp"
#include "compass/backends/cpu/memory.hpp"

namespace compass::backends::cpu {

using schedule::Buffer;
using schedule::BufferRole;
using schedule::Region;
using schedule::ResourceKind;
using schedule::Schedule;
using schedule::Task;
using schedule::TaskKind;
using Clock = std::chrono::steady_clock;

std::string task_label(const Schedule& s, int task_id) {
  if (task_id < 0 || task_id >= static_cast<int>(s.tasks.size()))
    return fmt::format("task {}", task_id);
  const Task& t = s.tasks[static_cast<std::size_t>(task_id)];
  return fmt::format("rank {} task {} '{}'", t.resource.rank, task_id, t.name);
}

// ---------------------------------------------------------------------------------------------
// Structural checks

namespace {

constexpr std::int64_t kMaxDim = std::int64_t{1} << 31;

bool overlap(const Region& a, const Region& b) {
  return a.buffer == b.buffer && a.row < b.row + b.rows && b.row < a.row + a.rows &&
         a.col < b.col + b.cols && b.col < a.col + a.cols && a.elements() > 0 && b.elements() > 0;
}

// What the executor needs beyond schedule::validate: no task may read what it writes, since
// BLAS and memcpy get aliased pointers otherwise.
Status check_aliasing(const Schedule& s, const Task& t) {
  if (t.kind == TaskKind::gemm) {
    if (overlap(t.dst, t.src) || overlap(t.dst, t.b))
      return make_error("{}: gemm output overlaps an operand", task_label(s, t.id));
  } else if (overlap(t.src, t.dst)) {
    return make_error("{}: src and dst overlap", task_label(s, t.id));
  }
  return Status::success();
}

// Each serial resource becomes one thread running these task ids in order (only the
// resources of rank `only_rank` when it is not negative).
std::vector<std::vector<int>> build_lanes(const Schedule& s, int only_rank = -1) {
  return schedule::resource_lanes(s, only_rank).tasks;
}

}  // namespace

bool compiled_in() { return true; }

Status check_executable(const Schedule& s) {
  // Structure, regions, shapes and deadlock freedom (deps plus resource order) are the
  // schedule's own contract; a cycle would otherwise only show up as a wait timeout.
  COMPASS_TRY(schedule::validate(s));
  for (const Buffer& b : s.buffers)
    if (b.rows >= kMaxDim || b.cols >= kMaxDim)
      return make_error("buffer '{}' of rank {}: bad shape [{}, {}]", b.name, b.rank, b.rows,
                        b.cols);
  for (const Task& t : s.tasks) COMPASS_TRY(check_aliasing(s, t));
  return Status::success();
}

// ---------------------------------------------------------------------------------------------
// Workspace

std::int64_t Workspace::bytes_needed(const Schedule& s) {
  // In double and saturated: a bogus schedule must not overflow the memory check.
  double total = 0;
  for (const Buffer& b : s.buffers)
    total += static_cast<double>(std::max<std::int64_t>(0, b.rows)) *
             static_cast<double>(std::max<std::int64_t>(0, b.cols));
  total *= sizeof(float);
  return total >= 9.0e18 ? static_cast<std::int64_t>(9.0e18) : static_cast<std::int64_t>(total);
}

Result<Workspace> Workspace::create(const Schedule& s, const OperatorData& data,
                                    const ExecutorOptions& options) {
  const workload::OperatorSpec& op = data.op;
  COMPASS_TRY(check_operator(op));
  if (s.op.kind != op.kind || s.op.m != op.m || s.op.n != op.n || s.op.k != op.k ||
      s.op.tp != op.tp)
    return make_error(
        "schedule is for {} M={} N={} K={} tp={} but the data is for {} M={} N={} "
        "K={} tp={}",
        workload::to_string(s.op.kind), s.op.m, s.op.n, s.op.k, s.op.tp, workload::to_string(op.kind), op.m, op.n, op.k,
        op.tp);
  if (s.ranks() != op.tp) return make_error("schedule has {} ranks but tp is {}", s.ranks(), op.tp);
  COMPASS_TRY(check_executable(s));

  Workspace ws;
  struct Want {
    const char* name;
    BufferRole role;
    workload::Block (*block)(const workload::OperatorSpec&, int);
    std::vector<int>* index;
  };
  const Want wants[] = {{"x", BufferRole::input, workload::input_block, &ws.x_},
                        {"w", BufferRole::weight, workload::weight_block, &ws.w_},
                        {"y", BufferRole::output, workload::output_block, &ws.y_}};
  for (int r = 0; r < op.tp; ++r) {
    for (const Want& want : wants) {
      const int i = s.find_buffer(r, want.name);
      if (i < 0) return make_error("rank {} has no buffer '{}'", r, want.name);
      const Buffer& b = s.buffers[static_cast<std::size_t>(i)];
      if (b.role != want.role)
        return make_error("buffer '{}' of rank {} has role {}, expected {}", b.name, r,
                          schedule::to_string(b.role), schedule::to_string(want.role));
      const workload::Block blk = want.block(op, r);
      if (b.rows != blk.rows || b.cols != blk.cols)
        return make_error("buffer '{}' of rank {} is [{}, {}], the operator needs [{}, {}]", b.name,
                          r, b.rows, b.cols, blk.rows, blk.cols);
      want.index->push_back(i);
    }
  }

  if (options.transport) {
    const Transport& tr = *options.transport;
    if (tr.size() != op.tp || tr.rank() < 0 || tr.rank() >= op.tp)
      return make_error("the {} transport has {} processes (this one rank {}) but tp is {}",
                        tr.name(), tr.size(), tr.rank(), op.tp);
    ws.local_rank_ = tr.rank();
  }
  // A process that holds one rank allocates only that rank's buffers.
  std::int64_t bytes = bytes_needed(s);
  if (ws.local_rank_ >= 0) {
    schedule::Schedule local;
    for (const Buffer& b : s.buffers)
      if (b.rank == ws.local_rank_) local.buffers.push_back(b);
    bytes = bytes_needed(local);
  }
  COMPASS_TRY(check_memory(bytes, options.memory_limit_bytes,
                           fmt::format("the {} buffers of the schedule", s.buffers.size())));
  try {
    ws.buffers_.reserve(s.buffers.size());
    for (const Buffer& b : s.buffers) {
      const bool held = ws.holds(b.rank);
      ws.buffers_.emplace_back(held ? static_cast<std::size_t>(b.rows * b.cols) : 0, 0.0f);
      ws.cols_.push_back(b.cols);
    }
  } catch (const std::bad_alloc&) {
    return make_error("out of memory allocating the {} buffers of the schedule ({} bytes)",
                      s.buffers.size(), bytes);
  }
  ws.reset(data);
  return ws;
}

void Workspace::reset(const OperatorData& in) {
  for (auto& b : buffers_) std::fill(b.begin(), b.end(), 0.0f);
  for (int r = 0; r < ranks(); ++r) {
    if (!holds(r)) continue;
    const workload::Block xb = workload::input_block(in.op, r);
    const int xi = x_[static_cast<std::size_t>(r)];
    copy_block(in.x.row(xb.row) + xb.col, in.x.cols, data(xi), ld(xi), xb.rows, xb.cols);
    const workload::Block wb = workload::weight_block(in.op, r);
    const int wi = w_[static_cast<std::size_t>(r)];
    copy_block(in.w.row(wb.row) + wb.col, in.w.cols, data(wi), ld(wi), wb.rows, wb.cols);
  }
}

ErrorStats compare_outputs(const Schedule& s, const Workspace& ws,
                           const HostMatrix<double>& reference) {
  ErrorStats stats;
  for (int r = 0; r < ws.ranks(); ++r) {
    if (!ws.holds(r)) continue;
    const int y = ws.output_buffer(r);
    accumulate_error(s.op, r, ws.data(y), ws.ld(y), reference, stats);
  }
  return stats;
}

// ---------------------------------------------------------------------------------------------
// Execution

namespace {

// Thrown inside a task that saw the run stopped between two pieces of work.
struct Stopped {};

// Shared state of one run. Every flag lives under one mutex: completions are rare compared to
// the work in a task, and a mutex gives each waiter the happens-before edge to the data the
// finished task wrote (which TSAN can check).
class Runner final : public TransportSink {
 public:
  Runner(const Schedule& s, Workspace& ws, const ExecutorOptions& o, TransferEngine& engine)
      : s_(s),
        ws_(ws),
        options_(o),
        engine_(engine),
        transport_(o.transport.get()),
        local_(o.transport ? o.transport->rank() : -1),
        done_(s.tasks.size(), 0) {
    plan_completions();
    double timeout_s = o.wait_timeout_s;
    if (timeout_s <= 0) {
      double flops = 0;
      double bytes = 0;
      for (const Task& t : s.tasks) {
        if (t.kind == TaskKind::gemm)
          flops += 2.0 * static_cast<double>(t.dst.rows) * static_cast<double>(t.dst.cols) *
                   static_cast<double>(t.src.cols);
        else
          bytes += static_cast<double>(t.dst.elements()) * sizeof(float);
      }
      timeout_s = 30.0 + flops / 1e9 + bytes / 1e8;
    }
    timeout_ =
        std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
    timeout_s_ = timeout_s;
  }

  // Thread body: run one resource's tasks in order.
  void run_lane(const std::vector<int>& lane) {
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return go_ || abort_; });
      if (abort_) return;
    }
    for (int id : lane) {
      const Task& t = s_.tasks[static_cast<std::size_t>(id)];
      if (!wait_for_deps(t)) return;
      try {
        if (id == options_.delay_task_id && !sleep_abortably(options_.delay_s)) return;
        if (id == options_.fail_task_id) throw std::runtime_error("injected fault");
        if (crosses_processes(t)) {
          // The bytes move through the transport; the destination process completes the task.
          start_remote_transfer(t);
          if (!wait_for_task(t, id)) return;
          continue;
        }
        execute(t);
      } catch (const Stopped&) {
        return;  // another task failed; its error is the run's
      } catch (const std::exception& e) {
        fail(id, e.what());
        return;
      } catch (...) {
        fail(id, "unknown exception");
        return;
      }
      finish(id);
    }
  }

  // Lanes call this when they return, whatever the reason.
  void lane_finished() {
    std::lock_guard lock(mu_);
    ++lanes_finished_;
  }

  // The progress loop of a multi-process run, on the calling thread: moves messages and bytes
  // until every local lane has finished, every task this process completes is complete, every
  // pull it owes is served and the transport is quiet, or the run fails.
  void progress(std::size_t lanes) {
    using namespace std::chrono_literals;
    auto idle_sleep = 0us;
    for (;;) {
      Result<bool> moved = transport_->poll(*this);
      if (!moved.ok()) {
        fail(-1, moved.error().message);
        break;
      }
      bool finished = false;
      {
        std::lock_guard lock(mu_);
        if (abort_) break;
        finished = lanes_finished_ == lanes && completed_ == expected_completions_ &&
                   pulls_served_ == expected_pulls_;
      }
      if (finished && transport_->quiescent()) break;
      // Back off while nothing moves (the machine may have fewer cores than processes).
      if (*moved) {
        idle_sleep = 0us;
      } else {
        idle_sleep = std::min<std::chrono::microseconds>(idle_sleep + 5us, 200us);
        std::this_thread::sleep_for(idle_sleep);
      }
    }
    bool failed = false;
    {
      std::lock_guard lock(mu_);
      failed = abort_;
    }
    if (failed) transport_->drain_after_failure(0.5);
  }

  // TransportSink, called from the progress loop.
  void on_message(const Message& m) override {
    switch (m.kind) {
      case MessageKind::done:
        if (valid_task(m.task)) mark_done(m.task);
        break;
      case MessageKind::pull:
        if (valid_task(m.task)) serve_pull(m.task);
        break;
      case MessageKind::abort:
        fail_from_remote(m.from, m.text);
        break;
    }
  }
  void on_data(int task) override {
    if (valid_task(task)) complete(task);
  }

  // Before the run: announce every transfer that lands in this process from another one.
  Status expect_incoming() {
    for (const Task& t : s_.tasks) {
      if (t.kind != TaskKind::transfer) continue;
      const int src = s_.owner(t.src), dst = s_.owner(t.dst);
      if (dst == local_ && src != local_)
        COMPASS_TRY(transport_->expect_data(src, t.id, span(t.dst)));
    }
    return Status::success();
  }

  double timeout_s() const { return timeout_s_; }

  void start() {
    std::lock_guard lock(mu_);
    go_ = true;
    start_time_ = Clock::now();
    end_time_ = start_time_;
    cv_.notify_all();
  }

  // Marks the run as failed (first error wins) and wakes every waiter; in a multi-process
  // run, tells every other process once. The abort is queued before the failure becomes
  // visible: the progress loop, once it sees the failure, drains the queue and then drops
  // what is left, so a message posted after that point would never leave.
  void fail(int task_id, const std::string& what) {
    {
      std::lock_guard lock(mu_);
      const Error e =
          task_id >= 0 ? make_error("{}: {}", task_label(s_, task_id), what) : Error{what};
      if (!error_) error_ = e;
      if (transport_ != nullptr && !told_others_)
        for (int r = 0; r < transport_->size(); ++r)
          if (r != local_) transport_->post(r, Message{MessageKind::abort, task_id, local_, e.message});
      told_others_ = true;
      abort_ = true;
      cv_.notify_all();
    }
    stop_.request_stop();
  }

  std::optional<Error> error() const {
    std::lock_guard lock(mu_);
    return error_;
  }
  double wall_s() const {
    std::lock_guard lock(mu_);
    return std::chrono::duration<double>(end_time_ - start_time_).count();
  }

 private:
  bool wait_for_deps(const Task& t) {
    std::unique_lock lock(mu_);
    auto ready = [&] {
      if (abort_) return true;
      for (int d : t.deps)
        if (!done_[static_cast<std::size_t>(d)]) return false;
      return true;
    };
    if (!cv_.wait_for(lock, timeout_, ready)) {
      int missing = -1;
      for (int d : t.deps)
        if (!done_[static_cast<std::size_t>(d)]) {
          missing = d;
          break;
        }
      const std::string what = fmt::format("{}: waited more than {:.3g} s for {} to finish",
                                           task_label(s_, t.id), timeout_s_,
                                           task_label(s_, missing));
      lock.unlock();
      fail(-1, what);
      return false;
    }
    return !abort_;
  }

  // Returns false when the run was aborted during the sleep.
  bool sleep_abortably(double seconds) {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, std::chrono::duration<double>(seconds), [&] { return abort_; });
    return !abort_;
  }

  void finish(int id) { complete(id); }

  // Task `id` completed in this process: mark it and tell the processes waiting for it.
  void complete(int id) {
    {
      std::lock_guard lock(mu_);
      done_[static_cast<std::size_t>(id)] = 1;
      if (++completed_ == expected_completions_) end_time_ = Clock::now();
      cv_.notify_all();
    }
    if (transport_ != nullptr)
      for (int r : notify_[static_cast<std::size_t>(id)])
        transport_->post(r, Message{MessageKind::done, id, local_, {}});
  }

  // Another process completed task `id`.
  void mark_done(int id) {
    std::lock_guard lock(mu_);
    done_[static_cast<std::size_t>(id)] = 1;
    cv_.notify_all();
  }

  void fail_from_remote(int from, const std::string& text) {
    {
      std::lock_guard lock(mu_);
      if (!error_) error_ = make_error("stopped because rank {} failed: {}", from, text);
      abort_ = true;
      told_others_ = true;  // the failing process tells everyone itself
      cv_.notify_all();
    }
    stop_.request_stop();
  }

  bool valid_task(int id) const { return id >= 0 && id < static_cast<int>(s_.tasks.size()); }

  int completer(const Task& t) const {
    return t.kind == TaskKind::transfer ? s_.owner(t.dst) : t.resource.rank;
  }

  // Which tasks this process completes, how many pulls it serves, and for every task the other
  // processes to notify when it completes: those with a task depending on it, and its owner
  // when another process completes it (the owner's lane waits for it).
  void plan_completions() {
    if (transport_ == nullptr) {
      expected_completions_ = s_.tasks.size();
      return;
    }
    notify_.assign(s_.tasks.size(), {});
    auto add = [&](int task, int rank) {
      auto& v = notify_[static_cast<std::size_t>(task)];
      if (rank != completer(s_.tasks[static_cast<std::size_t>(task)]) &&
          std::find(v.begin(), v.end(), rank) == v.end())
        v.push_back(rank);
    };
    for (const Task& t : s_.tasks) {
      if (completer(t) == local_) ++expected_completions_;
      add(t.id, t.resource.rank);
      for (int d : t.deps) add(d, t.resource.rank);
      if (t.kind == TaskKind::transfer && s_.owner(t.src) == local_ && t.resource.rank != local_)
        ++expected_pulls_;
    }
  }

  // A transfer run by this process's lane with an end in another process.
  bool crosses_processes(const Task& t) const {
    return transport_ != nullptr && t.kind == TaskKind::transfer &&
           (s_.owner(t.src) != local_ || s_.owner(t.dst) != local_);
  }

  void start_remote_transfer(const Task& t) {
    const int src = s_.owner(t.src), dst = s_.owner(t.dst);
    if (src == local_)
      transport_->send_data(dst, t.id, span(t.src));  // push
    else
      transport_->post(src, Message{MessageKind::pull, t.id, local_, {}});  // pull
  }

  // The source process is asked for the bytes of transfer `id`.
  void serve_pull(int id) {
    const Task& t = s_.tasks[static_cast<std::size_t>(id)];
    if (t.kind != TaskKind::transfer || s_.owner(t.src) != local_) {
      fail(-1, fmt::format("rank {} was asked for the bytes of {}, which it does not hold", local_,
                           task_label(s_, id)));
      return;
    }
    {
      std::lock_guard lock(mu_);
      ++pulls_served_;
    }
    if (s_.owner(t.dst) == local_) {
      copy_block(ptr(t.src), ld(t.src), ptr(t.dst), ld(t.dst), t.dst.rows, t.dst.cols);
      complete(id);
    } else {
      transport_->send_data(s_.owner(t.dst), id, span(t.src));
    }
  }

  // Waits (bounded) until task `id`, completed by another process, is done.
  bool wait_for_task(const Task& t, int id) {
    std::unique_lock lock(mu_);
    if (!cv_.wait_for(lock, timeout_, [&] { return abort_ || done_[static_cast<std::size_t>(id)]; })) {
      const std::string what =
          fmt::format("{}: waited more than {:.3g} s for rank {} to receive the bytes",
                      task_label(s_, t.id), timeout_s_, s_.owner(t.dst));
      lock.unlock();
      fail(-1, what);
      return false;
    }
    return !abort_;
  }

  Span span(const Region& r) { return Span{ptr(r), ld(r), r.rows, r.cols}; }

  // The GEMM of `t` as row blocks, checking for a stop before each one. Row i of the output
  // depends only on row i of A, and every block is large enough for BLAS to take the same
  // (blocked) path as one call would, so the blocks compute exactly what one call would.
  void gemm_in_pieces(const Task& t) {
    const std::int64_t m = t.dst.rows, n = t.dst.cols, k = t.src.cols;
    const double nk = static_cast<double>(n) * static_cast<double>(k);
    std::int64_t rows = m, least = m;
    if (options_.gemm_piece_flops > 0 && nk > 0) {
      auto aligned = [](double r) {
        return static_cast<std::int64_t>(r) / kGemmPieceRowAlign * kGemmPieceRowAlign;
      };
      const double md = static_cast<double>(m);
      const std::int64_t want = aligned(std::min(md, options_.gemm_piece_flops / (2.0 * nk)));
      const double least_rows = std::ceil(kGemmPieceMinMnk / nk) + kGemmPieceRowAlign - 1;
      least = std::max(kGemmPieceRowAlign, aligned(std::min(md, least_rows)));
      rows = std::max(want, least);
    }
    const float* a = ptr(t.src);
    const float* b = ptr(t.b);
    float* c = ptr(t.dst);
    const std::int64_t lda = ld(t.src), ldc = ld(t.dst);
    for (std::int64_t row = 0; row < m;) {
      if (stop_.stop_requested()) throw Stopped{};
      // A last block below the minimum size joins the one before it.
      const std::int64_t len = m - row - rows < least ? m - row : rows;
      if (options_.piece_counts) ++options_.piece_counts->run;
      Status st = sgemm(len, n, k, a + row * lda, lda, b, ld(t.b), c + row * ldc, ldc,
                        t.accumulate);
      if (options_.piece_counts && stop_.stop_requested()) ++options_.piece_counts->after_stop;
      if (!st.ok()) throw std::runtime_error(st.error().message);
      row += len;
    }
  }

  float* ptr(const Region& r) { return ws_.data(r.buffer) + r.row * ws_.ld(r.buffer) + r.col; }
  std::int64_t ld(const Region& r) const { return ws_.ld(r.buffer); }

  void execute(const Task& t) {
    switch (t.kind) {
      case TaskKind::gemm:
        gemm_in_pieces(t);
        break;
      case TaskKind::transfer: {
        TransferRequest req;
        req.task = &t;
        req.src_rank = s_.owner(t.src);
        req.dst_rank = s_.owner(t.dst);
        req.bytes = t.dst.elements() * dtype_bytes(s_.op.dtype);
        req.src = ptr(t.src);
        req.src_ld = ld(t.src);
        req.dst = ptr(t.dst);
        req.dst_ld = ld(t.dst);
        req.rows = t.dst.rows;
        req.cols = t.dst.cols;
        engine_.transfer(req, stop_.get_token());
        break;
      }
      case TaskKind::copy:
        copy_block(ptr(t.src), ld(t.src), ptr(t.dst), ld(t.dst), t.dst.rows, t.dst.cols);
        break;
      case TaskKind::add: {
        const float* src = ptr(t.src);
        float* dst = ptr(t.dst);
        const std::int64_t sld = ld(t.src), dld = ld(t.dst);
        for (std::int64_t i = 0; i < t.dst.rows; ++i) {
          const float* in = src + i * sld;
          float* out = dst + i * dld;
          for (std::int64_t j = 0; j < t.dst.cols; ++j) out[j] += in[j];
        }
        break;
      }
    }
  }

  const Schedule& s_;
  Workspace& ws_;
  const ExecutorOptions& options_;
  TransferEngine& engine_;
  Transport* transport_ = nullptr;  // null: every rank in this process
  int local_ = -1;
  std::vector<std::vector<int>> notify_;  // per task: processes told when it completes
  std::size_t expected_completions_ = 0;
  std::size_t expected_pulls_ = 0;
  Clock::duration timeout_{};
  double timeout_s_ = 0;
  std::stop_source stop_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::uint8_t> done_;  // guarded by mu_
  std::size_t completed_ = 0;
  std::size_t pulls_served_ = 0;
  std::size_t lanes_finished_ = 0;
  bool go_ = false;
  bool abort_ = false;
  bool told_others_ = false;
  std::optional<Error> error_;
  Clock::time_point start_time_{}, end_time_{};
};

}  // namespace

Result<RunStats> run(const Schedule& s, Workspace& ws, const ExecutorOptions& options) {
  COMPASS_TRY(check_executable(s));
  if (ws.buffers().size() != s.buffers.size())
    return make_error("workspace has {} buffers but the schedule has {}", ws.buffers().size(),
                      s.buffers.size());
  const int local = options.transport ? options.transport->rank() : -1;
  if (ws.local_rank() != local)
    return make_error("the workspace holds {} but the run is for {}",
                      ws.local_rank() < 0 ? "every rank" : fmt::format("rank {}", ws.local_rank()),
                      local < 0 ? "every rank" : fmt::format("rank {}", local));
  for (std::size_t i = 0; i < s.buffers.size(); ++i)
    if (ws.holds(s.buffers[i].rank) &&
        ws.buffers()[i].size() != static_cast<std::size_t>(s.buffers[i].rows * s.buffers[i].cols))
      return make_error("workspace buffer {} does not match buffer '{}' of the schedule", i,
                        s.buffers[i].name);
  if (options.blas_threads_per_rank < 1)
    return make_error("threads per rank must be at least 1, got {}", options.blas_threads_per_rank);

  set_blas_threads(options.blas_threads_per_rank);
  MemcpyTransferEngine memcpy_engine;
  TransferEngine& engine = options.transfer_engine ? *options.transfer_engine : memcpy_engine;

  const std::vector<std::vector<int>> lanes = build_lanes(s, local);
  Runner runner(s, ws, options, engine);
  if (options.transport) {
    // Every process posts its receives, then all start together.
    if (Status st = runner.expect_incoming(); !st.ok()) {
      runner.fail(-1, st.error().message);
      options.transport->drain_after_failure(0.5);
      return *runner.error();
    }
    if (Status st = options.transport->barrier(runner.timeout_s()); !st.ok()) {
      runner.fail(-1, fmt::format("rank {}: {}", local, st.error().message));
      options.transport->drain_after_failure(0.5);
      return *runner.error();
    }
  }
  {
    std::vector<std::jthread> threads;
    try {
      threads.reserve(lanes.size());
      for (const auto& lane : lanes)
        threads.emplace_back([&runner, &lane] {
          runner.run_lane(lane);
          runner.lane_finished();
        });
    } catch (const std::system_error& e) {
      // Threads already started are waiting for the start signal: abort releases them and the
      // jthread destructors join them.
      runner.fail(-1, fmt::format("cannot start executor thread {} of {}: {}", threads.size() + 1,
                                  lanes.size(), e.what()));
      if (options.transport) options.transport->drain_after_failure(0.5);
      return *runner.error();
    } catch (const std::bad_alloc&) {
      runner.fail(-1, "out of memory starting the executor threads");
      if (options.transport) options.transport->drain_after_failure(0.5);
      return *runner.error();
    }
    runner.start();
    if (options.transport) runner.progress(lanes.size());
  }  // joins every thread

  if (auto err = runner.error()) return *err;
  RunStats stats;
  stats.wall_s = runner.wall_s();
  stats.tasks = static_cast<int>(s.tasks.size());
  stats.threads = static_cast<int>(lanes.size());
  for (const Task& t : s.tasks) {
    if (t.kind == TaskKind::gemm)
      stats.gemm_flops += 2.0 * static_cast<double>(t.dst.rows) * static_cast<double>(t.dst.cols) *
                          static_cast<double>(t.src.cols);
    if (t.kind == TaskKind::transfer)
      stats.transfer_bytes += t.dst.elements() * static_cast<std::int64_t>(sizeof(float));
  }
  return stats;
}

}  // namespace compass::backends::cpu
