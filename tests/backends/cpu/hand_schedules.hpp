#pragma once
// Small schedules built by hand for the executor tests: they exercise every task kind, both
// resource kinds and cross-rank dependencies without depending on the generators.

#include <string>
#include <vector>

#include "compass/schedule/schedule.hpp"

namespace compass::backends::cpu::testing {

using schedule::BufferRole;
using schedule::Region;
using schedule::Resource;
using schedule::ResourceKind;
using schedule::Schedule;
using schedule::Task;
using schedule::TaskKind;

/// Appends buffers and tasks to a schedule with little ceremony.
struct Builder {
  Schedule s;

  Builder(workload::OpKind kind, std::int64_t m, std::int64_t n, std::int64_t k, int p) {
    s.op.kind = kind;
    s.op.m = m;
    s.op.n = n;
    s.op.k = k;
    s.op.tp = p;
    s.op.dtype = DType::fp32;
    for (int r = 0; r < p; ++r) s.gpus.push_back(r);
    s.copy_engines = 1;
  }
  int buffer(int rank, const std::string& name, std::int64_t rows, std::int64_t cols,
             BufferRole role) {
    s.buffers.push_back({name, rank, rows, cols, role});
    return static_cast<int>(s.buffers.size()) - 1;
  }
  Region rows_of(int buf, std::int64_t row, std::int64_t rows) const {
    return {buf, row, rows, 0, s.buffers[static_cast<std::size_t>(buf)].cols};
  }
  Region all(int buf) const {
    return rows_of(buf, 0, s.buffers[static_cast<std::size_t>(buf)].rows);
  }
  int task(TaskKind kind, Resource res, std::vector<int> deps, Region src, Region b, Region dst,
           const std::string& name, bool accumulate = false) {
    Task t;
    t.id = static_cast<int>(s.tasks.size());
    t.kind = kind;
    t.resource = res;
    t.deps = std::move(deps);
    t.src = src;
    t.b = b;
    t.dst = dst;
    t.accumulate = accumulate;
    t.name = name;
    s.tasks.push_back(t);
    return t.id;
  }
};

inline Resource compute(int r) {
  return {r, ResourceKind::compute, 0};
}
inline Resource copy_engine(int r, int i = 0) {
  return {r, ResourceKind::copy_engine, i};
}

/// AG-GEMM, all-to-all fused style: every rank sends its shard to every peer on copy engine 0
/// and computes the GEMM chunk by chunk as chunks land, own shard first.
inline Schedule hand_ag_gemm(std::int64_t m, std::int64_t n, std::int64_t k, int p) {
  Builder b(workload::OpKind::ag_gemm, m, n, k, p);
  const std::int64_t mr = m / p, nr = n / p;
  std::vector<int> x(p), w(p), xg(p), y(p);
  for (int r = 0; r < p; ++r) {
    x[r] = b.buffer(r, "x", mr, k, BufferRole::input);
    w[r] = b.buffer(r, "w", k, nr, BufferRole::weight);
    xg[r] = b.buffer(r, "xg", m, k, BufferRole::scratch);
    y[r] = b.buffer(r, "y", m, nr, BufferRole::output);
  }
  // arrival[r][c]: the task that puts chunk c into xg of rank r.
  std::vector<std::vector<int>> arrival(p, std::vector<int>(p, -1));
  for (int r = 0; r < p; ++r) {
    arrival[r][r] = b.task(TaskKind::copy, copy_engine(r), {}, b.all(x[r]), {},
                           b.rows_of(xg[r], r * mr, mr), "r" + std::to_string(r) + " own");
    for (int s = 1; s < p; ++s) {
      const int peer = (r + s) % p;
      arrival[peer][r] = b.task(TaskKind::transfer, copy_engine(r), {}, b.all(x[r]), {},
                                b.rows_of(xg[peer], r * mr, mr),
                                "r" + std::to_string(r) + " send to r" + std::to_string(peer));
    }
  }
  for (int r = 0; r < p; ++r)
    for (int s = 0; s < p; ++s) {
      const int c = (r + p - s) % p;  // own chunk first, then in arrival order of the loop
      b.task(TaskKind::gemm, compute(r), {arrival[r][c]}, b.rows_of(xg[r], c * mr, mr), b.all(w[r]),
             b.rows_of(y[r], c * mr, mr), "r" + std::to_string(r) + " gemm c" + std::to_string(c));
    }
  return b.s;
}

/// GEMM-RS (and with `all_reduce`, GEMM-AR): each rank computes its full partial, sends every
/// peer the rows that peer owns, and the owner adds the partials in rank order (a fixed order,
/// so the result is deterministic); GEMM-AR then all-gathers the reduced blocks.
inline Schedule hand_gemm_rs(std::int64_t m, std::int64_t n, std::int64_t k, int p,
                             bool all_reduce = false) {
  Builder b(all_reduce ? workload::OpKind::gemm_ar : workload::OpKind::gemm_rs, m, n, k, p);
  const std::int64_t mr = m / p, kr = k / p;
  std::vector<int> x(p), w(p), part(p), recv(p), red(p), y(p);
  for (int r = 0; r < p; ++r) {
    x[r] = b.buffer(r, "x", m, kr, BufferRole::input);
    w[r] = b.buffer(r, "w", kr, n, BufferRole::weight);
    part[r] = b.buffer(r, "part", m, n, BufferRole::scratch);
    recv[r] = b.buffer(r, "recv", m, n, BufferRole::scratch);  // slot s = rows [s*mr, (s+1)*mr)
    if (all_reduce) red[r] = b.buffer(r, "red", mr, n, BufferRole::scratch);
    y[r] = b.buffer(r, "y", all_reduce ? m : mr, n, BufferRole::output);
  }
  std::vector<int> gemm(p);
  for (int r = 0; r < p; ++r)
    gemm[r] = b.task(TaskKind::gemm, compute(r), {}, b.all(x[r]), b.all(w[r]), b.all(part[r]),
                     "r" + std::to_string(r) + " partial");
  // sent[d][s]: the transfer of rank s's partial rows d into recv slot s of rank d.
  std::vector<std::vector<int>> sent(p, std::vector<int>(p, -1));
  for (int s = 0; s < p; ++s)
    for (int i = 1; i < p; ++i) {
      const int d = (s + i) % p;
      sent[d][s] = b.task(TaskKind::transfer, copy_engine(s), {gemm[s]},
                          b.rows_of(part[s], d * mr, mr), {}, b.rows_of(recv[d], s * mr, mr),
                          "r" + std::to_string(s) + " rs to r" + std::to_string(d));
    }
  std::vector<int> reduced(p);
  for (int d = 0; d < p; ++d) {
    const int acc = all_reduce ? red[d] : y[d];
    const Region acc_rows = b.all(acc);
    int last = b.task(TaskKind::copy, compute(d), {gemm[d]}, b.rows_of(part[d], d * mr, mr), {},
                      acc_rows, "r" + std::to_string(d) + " own partial");
    for (int s = 0; s < p; ++s) {
      if (s == d) continue;
      last = b.task(TaskKind::add, compute(d), {last, sent[d][s]}, b.rows_of(recv[d], s * mr, mr),
                    {}, acc_rows, "r" + std::to_string(d) + " add from r" + std::to_string(s));
    }
    reduced[d] = last;
  }
  if (all_reduce) {
    for (int s = 0; s < p; ++s) {
      b.task(TaskKind::copy, compute(s), {reduced[s]}, b.all(red[s]), {},
             b.rows_of(y[s], s * mr, mr), "r" + std::to_string(s) + " ag own");
      for (int i = 1; i < p; ++i) {
        const int d = (s + i) % p;
        b.task(TaskKind::transfer, copy_engine(s), {reduced[s]}, b.all(red[s]), {},
               b.rows_of(y[d], s * mr, mr),
               "r" + std::to_string(s) + " ag to r" + std::to_string(d));
      }
    }
  }
  return b.s;
}

}  // namespace compass::backends::cpu::testing
