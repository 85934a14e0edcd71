#include "compass/backends/cpu/calibrate.hpp"

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cstring>
#include <map>
#include <set>
#include <thread>

#include "compass/backends/cpu/blas.hpp"
#include "compass/backends/cpu/executor.hpp"
#include "compass/schedule/generate.hpp"

namespace compass::backends::cpu {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Time of one GEMM while `threads` identical GEMMs run at once, each on its own operands:
// every thread repeats its GEMM until the window is spent; per-GEMM time = window / rounds.
Result<double> time_concurrent_gemm(const GemmShape& s, int threads, double window_s) {
  struct Operands {
    std::vector<float> a, b, c;
  };
  std::vector<Operands> ops(static_cast<std::size_t>(threads));
  for (auto& o : ops) {
    o.a.assign(static_cast<std::size_t>(s.m * s.k), 0.5f);
    o.b.assign(static_cast<std::size_t>(s.k * s.n), 0.25f);
    o.c.assign(static_cast<std::size_t>(s.m * s.n), 0.0f);
  }
  auto one = [&](Operands& o) {
    return sgemm(s.m, s.n, s.k, o.a.data(), s.k, o.b.data(), s.n, o.c.data(), s.n, false);
  };
  COMPASS_TRY(one(ops[0]));  // warm-up, and BLAS errors surface here
  // Rounds: all threads run one GEMM, then meet at the barrier; thread 0 times each round
  // and decides whether to go on, so every thread runs the same number. The median round is
  // kept: the fastest is biased low on a virtual machine whose cores' speed varies with the
  // host's load, and the validation runs see the typical speed (docs/validation.md, "Noise").
  std::barrier sync(threads);
  std::atomic<bool> more{true};
  std::atomic<bool> failed{false};
  std::vector<double> rounds;
  const auto t0 = Clock::now();
  std::vector<std::jthread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      auto round_start = Clock::now();
      for (;;) {
        if (!one(ops[static_cast<std::size_t>(t)]).ok()) failed = true;
        sync.arrive_and_wait();  // the round is over for everybody
        if (t == 0) {
          rounds.push_back(seconds_since(round_start));
          more = seconds_since(t0) < window_s || rounds.size() < 3;
        }
        sync.arrive_and_wait();  // thread 0 has decided
        if (!more) break;
        if (t == 0) round_start = Clock::now();
      }
    });
  pool.clear();
  if (failed) return make_error("sgemm {}x{}x{} failed", s.m, s.n, s.k);
  std::sort(rounds.begin(), rounds.end());
  return rounds[rounds.size() / 2];
}

double measure_copy_bandwidth(double window_s) {
  const std::size_t bytes = 64u << 20;
  std::vector<char> a(bytes, 1), b(bytes, 0);
  std::memcpy(b.data(), a.data(), bytes);
  int n = 0;
  const auto t0 = Clock::now();
  do {
    std::memcpy(b.data(), a.data(), bytes);
    ++n;
  } while (seconds_since(t0) < window_s);
  return static_cast<double>(bytes) * n / seconds_since(t0);
}

double measure_wake_lag(int samples) {
  double total = 0;
  for (int i = 0; i < samples; ++i) {
    const auto target = Clock::now() + std::chrono::microseconds(200);
    std::this_thread::sleep_until(target);
    total += std::chrono::duration<double>(Clock::now() - target).count();
  }
  return total / samples;
}

// Executor overhead per task: a sequential schedule of a tiny operator, whose work is
// negligible, timed end to end and divided by the tasks of its longest resource chain.
Result<double> measure_task_overhead(int ranks, int runs) {
  workload::OperatorSpec op;
  op.kind = workload::OpKind::gemm_rs;
  op.m = 8 * ranks;
  op.n = 8;
  op.k = 8 * ranks;
  op.tp = ranks;
  op.dtype = DType::fp32;
  COMPASS_ASSIGN(schedule::Schedule s,
                 schedule::generate(op, schedule::Strategy{schedule::StrategyKind::sequential, 1},
                                    schedule::default_comm_plan(ranks)));
  COMPASS_ASSIGN(OperatorData data, make_operator_data(op, 1));
  COMPASS_ASSIGN(Workspace ws, Workspace::create(s, data));
  std::vector<double> walls;
  for (int i = 0; i < runs + 1; ++i) {
    ws.reset(data);
    COMPASS_ASSIGN(RunStats st, run(s, ws));
    if (i > 0) walls.push_back(st.wall_s);
  }
  std::sort(walls.begin(), walls.end());
  const double per_rank = static_cast<double>(s.tasks.size()) / ranks;
  return walls[walls.size() / 2] / std::max(1.0, per_rank);
}

}  // namespace

Result<CpuCalibration> calibrate(const CpuCalibrateOptions& o) {
  if (o.concurrency < 1) return make_error("concurrency must be at least 1, got {}", o.concurrency);
  std::set<GemmShape> shapes(o.shapes.begin(), o.shapes.end());
  if (shapes.empty()) return make_error("no GEMM shapes to calibrate");
  for (const auto& s : shapes)
    if (s.m <= 0 || s.n <= 0 || s.k <= 0)
      return make_error("GEMM shape {}x{}x{} is not positive", s.m, s.n, s.k);
  const auto t0 = Clock::now();
  CpuCalibration c;
  c.concurrency = o.concurrency;
  c.blas = blas_description();
  const double window = o.quick ? 0.03 : 0.2;
  const double steps = static_cast<double>(shapes.size()) * (o.quick ? 1 : 3) + 3;
  int done = 0;
  auto tick = [&] {
    ++done;
    if (o.progress) o.progress(done / steps);
  };
  const int saved_threads = blas_threads();
  set_blas_threads(1);  // as the executor runs its ranks
  // Several passes over all shapes, keeping each shape's median pass: a burst of load from
  // other processes then spoils one pass of a shape, not its table entry.
  const int passes = o.quick ? 1 : 3;
  std::map<GemmShape, std::vector<double>> times;
  for (int pass = 0; pass < passes; ++pass)
    for (const auto& s : shapes) {
      auto t = time_concurrent_gemm(s, o.concurrency, window / passes);
      if (!t.ok()) {
        set_blas_threads(saved_threads);
        return t.error();
      }
      times[s].push_back(*t);
      tick();
    }
  for (auto& [s, ts] : times) {
    std::sort(ts.begin(), ts.end());
    const double t = ts[ts.size() / 2];
    hardware::GemmSample g;
    g.dtype = DType::fp32;
    g.m = s.m;
    g.n = s.n;
    g.k = s.k;
    g.time_s = t;
    c.best_flops_per_s = std::max(c.best_flops_per_s, 2.0 * s.m * s.n * s.k / t);
    c.gemm.push_back(g);
  }
  set_blas_threads(saved_threads);
  c.copy_bandwidth_bytes_per_s = measure_copy_bandwidth(o.quick ? 0.1 : 0.5);
  tick();
  c.wake_lag_s = measure_wake_lag(o.quick ? 50 : 200);
  tick();
  COMPASS_ASSIGN(c.task_overhead_s, measure_task_overhead(o.concurrency, o.quick ? 5 : 20));
  tick();
  c.elapsed_s = seconds_since(t0);
  return c;
}


std::vector<GemmShape> gemm_shapes(const schedule::Schedule& s) {
  std::set<GemmShape> out;
  for (const auto& t : s.tasks)
    if (t.kind == schedule::TaskKind::gemm) out.insert({t.dst.rows, t.dst.cols, t.src.cols});
  return {out.begin(), out.end()};
}

}  // namespace compass::backends::cpu
