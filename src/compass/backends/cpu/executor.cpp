#include "compass/backends/cpu/executor.hpp"

#include <algorithm>
#include <chrono>
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

using LaneKey = std::tuple<int, int, int>;  // rank, resource kind, index

LaneKey lane_key(const Task& t) {
  return {t.resource.rank, static_cast<int>(t.resource.kind), t.resource.index};
}

// Each serial resource becomes one thread running these task ids in order.
std::vector<std::vector<int>> build_lanes(const Schedule& s) {
  std::map<LaneKey, std::size_t> index;
  std::vector<std::vector<int>> lanes;
  for (const Task& t : s.tasks) {
    auto [it, inserted] = index.try_emplace(lane_key(t), lanes.size());
    if (inserted) lanes.emplace_back();
    lanes[it->second].push_back(t.id);
  }
  return lanes;
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
    Block (*block)(const workload::OperatorSpec&, int);
    std::vector<int>* index;
  };
  const Want wants[] = {{"x", BufferRole::input, input_block, &ws.x_},
                        {"w", BufferRole::weight, weight_block, &ws.w_},
                        {"y", BufferRole::output, output_block, &ws.y_}};
  for (int r = 0; r < op.tp; ++r) {
    for (const Want& want : wants) {
      const int i = s.find_buffer(r, want.name);
      if (i < 0) return make_error("rank {} has no buffer '{}'", r, want.name);
      const Buffer& b = s.buffers[static_cast<std::size_t>(i)];
      if (b.role != want.role)
        return make_error("buffer '{}' of rank {} has role {}, expected {}", b.name, r,
                          schedule::to_string(b.role), schedule::to_string(want.role));
      const Block blk = want.block(op, r);
      if (b.rows != blk.rows || b.cols != blk.cols)
        return make_error("buffer '{}' of rank {} is [{}, {}], the operator needs [{}, {}]", b.name,
                          r, b.rows, b.cols, blk.rows, blk.cols);
      want.index->push_back(i);
    }
  }

  const std::int64_t bytes = bytes_needed(s);
  COMPASS_TRY(check_memory(bytes, options.memory_limit_bytes,
                           fmt::format("the {} buffers of the schedule", s.buffers.size())));
  try {
    ws.buffers_.reserve(s.buffers.size());
    for (const Buffer& b : s.buffers) {
      ws.buffers_.emplace_back(static_cast<std::size_t>(b.rows * b.cols), 0.0f);
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
    const Block xb = input_block(in.op, r);
    const int xi = x_[static_cast<std::size_t>(r)];
    copy_block(in.x.row(xb.row) + xb.col, in.x.cols, data(xi), ld(xi), xb.rows, xb.cols);
    const Block wb = weight_block(in.op, r);
    const int wi = w_[static_cast<std::size_t>(r)];
    copy_block(in.w.row(wb.row) + wb.col, in.w.cols, data(wi), ld(wi), wb.rows, wb.cols);
  }
}

ErrorStats compare_outputs(const Schedule& s, const Workspace& ws,
                           const HostMatrix<double>& reference) {
  ErrorStats stats;
  for (int r = 0; r < ws.ranks(); ++r) {
    const int y = ws.output_buffer(r);
    accumulate_error(s.op, r, ws.data(y), ws.ld(y), reference, stats);
  }
  return stats;
}

// ---------------------------------------------------------------------------------------------
// Execution

namespace {

// Shared state of one run. Every flag lives under one mutex: completions are rare compared to
// the work in a task, and a mutex gives each waiter the happens-before edge to the data the
// finished task wrote (which TSAN can check).
class Runner {
 public:
  Runner(const Schedule& s, Workspace& ws, const ExecutorOptions& o, TransferEngine& engine)
      : s_(s), ws_(ws), options_(o), engine_(engine), done_(s.tasks.size(), 0) {
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
        execute(t);
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

  void start() {
    std::lock_guard lock(mu_);
    go_ = true;
    start_time_ = Clock::now();
    end_time_ = start_time_;
    cv_.notify_all();
  }

  // Marks the run as failed (first error wins) and wakes every waiter.
  void fail(int task_id, const std::string& what) {
    {
      std::lock_guard lock(mu_);
      if (!error_)
        error_ = task_id >= 0 ? make_error("{}: {}", task_label(s_, task_id), what) : Error{what};
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
      if (!error_)
        error_ = make_error("{}: waited more than {:.3g} s for {} to finish", task_label(s_, t.id),
                            timeout_s_, task_label(s_, missing));
      abort_ = true;
      cv_.notify_all();
      lock.unlock();
      stop_.request_stop();
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

  void finish(int id) {
    std::lock_guard lock(mu_);
    done_[static_cast<std::size_t>(id)] = 1;
    if (++completed_ == s_.tasks.size()) end_time_ = Clock::now();
    cv_.notify_all();
  }

  float* ptr(const Region& r) { return ws_.data(r.buffer) + r.row * ws_.ld(r.buffer) + r.col; }
  std::int64_t ld(const Region& r) const { return ws_.ld(r.buffer); }

  void execute(const Task& t) {
    switch (t.kind) {
      case TaskKind::gemm: {
        Status st = sgemm(t.dst.rows, t.dst.cols, t.src.cols, ptr(t.src), ld(t.src), ptr(t.b),
                          ld(t.b), ptr(t.dst), ld(t.dst), t.accumulate);
        if (!st.ok()) throw std::runtime_error(st.error().message);
        break;
      }
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
  Clock::duration timeout_{};
  double timeout_s_ = 0;
  std::stop_source stop_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::uint8_t> done_;  // guarded by mu_
  std::size_t completed_ = 0;
  bool go_ = false;
  bool abort_ = false;
  std::optional<Error> error_;
  Clock::time_point start_time_{}, end_time_{};
};

}  // namespace

Result<RunStats> run(const Schedule& s, Workspace& ws, const ExecutorOptions& options) {
  COMPASS_TRY(check_executable(s));
  if (ws.buffers().size() != s.buffers.size())
    return make_error("workspace has {} buffers but the schedule has {}", ws.buffers().size(),
                      s.buffers.size());
  for (std::size_t i = 0; i < s.buffers.size(); ++i)
    if (ws.buffers()[i].size() != static_cast<std::size_t>(s.buffers[i].rows * s.buffers[i].cols))
      return make_error("workspace buffer {} does not match buffer '{}' of the schedule", i,
                        s.buffers[i].name);
  if (options.blas_threads_per_rank < 1)
    return make_error("threads per rank must be at least 1, got {}", options.blas_threads_per_rank);

  set_blas_threads(options.blas_threads_per_rank);
  MemcpyTransferEngine memcpy_engine;
  TransferEngine& engine = options.transfer_engine ? *options.transfer_engine : memcpy_engine;

  const std::vector<std::vector<int>> lanes = build_lanes(s);
  Runner runner(s, ws, options, engine);
  {
    std::vector<std::jthread> threads;
    try {
      threads.reserve(lanes.size());
      for (const auto& lane : lanes)
        threads.emplace_back([&runner, &lane] { runner.run_lane(lane); });
    } catch (const std::system_error& e) {
      // Threads already started are waiting for the start signal: abort releases them and the
      // jthread destructors join them.
      runner.fail(-1, fmt::format("cannot start executor thread {} of {}: {}", threads.size() + 1,
                                  lanes.size(), e.what()));
      return *runner.error();
    } catch (const std::bad_alloc&) {
      runner.fail(-1, "out of memory starting the executor threads");
      return *runner.error();
    }
    runner.start();
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
