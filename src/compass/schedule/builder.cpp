#include "compass/schedule/builder.hpp"

#include <algorithm>

namespace compass::schedule::detail {

namespace {

bool overlaps(const Region& a, const Region& b) {
  return a.buffer == b.buffer && a.row < b.row + b.rows && b.row < a.row + a.rows &&
         a.col < b.col + b.cols && b.col < a.col + a.cols;
}

bool covers(const Region& outer, const Region& inner) {
  return outer.buffer == inner.buffer && outer.row <= inner.row &&
         inner.row + inner.rows <= outer.row + outer.rows && outer.col <= inner.col &&
         inner.col + inner.cols <= outer.col + outer.cols;
}

bool empty(const Region& r) {
  return r.rows <= 0 || r.cols <= 0;
}

}  // namespace

Builder::Builder(const workload::OperatorSpec& op, const Strategy& strategy,
                 const std::vector<int>& gpus) {
  s_.op = op;
  s_.strategy = strategy;
  s_.gpus = gpus;
}

void Builder::buffer(int rank, const std::string& name, std::int64_t rows, std::int64_t cols,
                     BufferRole role) {
  auto key = std::make_pair(rank, name);
  COMPASS_CHECK(!index_.count(key), "buffer '{}' of rank {} declared twice", name, rank);
  index_[key] = static_cast<int>(s_.buffers.size());
  s_.buffers.push_back(Buffer{name, rank, rows, cols, role});
  writes_.emplace_back();
  reads_.emplace_back();
}

Region Builder::rows(int rank, const std::string& name, Rows r) const {
  auto it = index_.find({rank, name});
  COMPASS_CHECK(it != index_.end(), "no buffer '{}' on rank {}", name, rank);
  const Buffer& b = s_.buffers[static_cast<std::size_t>(it->second)];
  COMPASS_CHECK(r.off >= 0 && r.len >= 0 && r.off + r.len <= b.rows,
                "rows [{}, {}) outside '{}' of rank {} ({} rows)", r.off, r.off + r.len, name, rank,
                b.rows);
  return Region{it->second, r.off, r.len, 0, b.cols};
}

Region Builder::whole(int rank, const std::string& name) const {
  auto it = index_.find({rank, name});
  COMPASS_CHECK(it != index_.end(), "no buffer '{}' on rank {}", name, rank);
  return rows(rank, name, Rows{0, s_.buffers[static_cast<std::size_t>(it->second)].rows});
}

void Builder::AccessList::add(const Access& a) {
  by_row.emplace(a.region.row, a);
  max_rows = std::max(max_rows, a.region.rows);
}

template <typename F>
void Builder::AccessList::for_each_near(std::int64_t row, std::int64_t rows, F&& f) const {
  // An access starting before row - max_rows + 1 ends at or before `row`.
  auto it = by_row.lower_bound(row - max_rows + 1);
  const auto end = by_row.lower_bound(row + rows);
  for (; it != end; ++it) f(it->second);
}

void Builder::access(int task, const Region& r, bool write, std::vector<int>& deps) {
  AccessList& writes = writes_[static_cast<std::size_t>(r.buffer)];
  AccessList& reads = reads_[static_cast<std::size_t>(r.buffer)];
  writes.for_each_near(r.row, r.rows, [&](const Access& a) {
    if (overlaps(a.region, r)) deps.push_back(a.task);
  });
  if (!write) {
    reads.add(Access{task, r, false});
    return;
  }
  reads.for_each_near(r.row, r.rows, [&](const Access& a) {
    if (overlaps(a.region, r)) deps.push_back(a.task);
  });
  // A write that covers an earlier access orders every later conflicting access after it,
  // so the earlier one need not be remembered (keeps the lists short and deps minimal). A
  // covered access starts inside the write's rows.
  auto erase_covered = [&](AccessList& list) {
    auto it = list.by_row.lower_bound(r.row);
    const auto end = list.by_row.lower_bound(r.row + r.rows);
    while (it != end) {
      if (it->second.task != task && covers(r, it->second.region))
        it = list.by_row.erase(it);
      else
        ++it;
    }
  };
  erase_covered(writes);
  erase_covered(reads);
  writes.add(Access{task, r, true});
}

int Builder::emit(Task t) {
  if (empty(t.src) || empty(t.dst) || (t.kind == TaskKind::gemm && empty(t.b))) return -1;
  t.id = static_cast<int>(s_.tasks.size());
  std::vector<int> deps;
  access(t.id, t.src, false, deps);
  if (t.kind == TaskKind::gemm) access(t.id, t.b, false, deps);
  // add and accumulating gemm read their destination too; a write subsumes that for hazards.
  access(t.id, t.dst, true, deps);
  std::sort(deps.begin(), deps.end());
  deps.erase(std::unique(deps.begin(), deps.end()), deps.end());
  std::erase(deps, t.id);
  t.deps = std::move(deps);
  s_.tasks.push_back(std::move(t));
  return s_.tasks.back().id;
}

namespace {

// The fields every task kind sets; the factories below add what is particular to their kind.
Task make_task(TaskKind kind, Resource resource, Region src, Region dst, int step, int chunk,
               std::string name) {
  Task t;
  t.kind = kind;
  t.resource = resource;
  t.src = src;
  t.dst = dst;
  t.step = step;
  t.chunk = chunk;
  t.name = std::move(name);
  return t;
}

}  // namespace

int Builder::transfer(Region src, Region dst, int engine, int channel, int step, int chunk,
                      std::string name) {
  const Resource engine_of_sender{s_.buffers.at(static_cast<std::size_t>(src.buffer)).rank,
                                  ResourceKind::copy_engine, engine};
  Task t = make_task(TaskKind::transfer, engine_of_sender, src, dst, step, chunk, std::move(name));
  t.channel = channel;
  return emit(std::move(t));
}

int Builder::gemm(int rank, Region a, Region b, Region c, int step, int chunk, std::string name) {
  Task t = make_task(TaskKind::gemm, Resource{rank, ResourceKind::compute, 0}, a, c, step, chunk,
                     std::move(name));
  t.b = b;
  return emit(std::move(t));
}

int Builder::add(int rank, Region src, Region dst, int step, int chunk, std::string name) {
  return emit(make_task(TaskKind::add, Resource{rank, ResourceKind::compute, 0}, src, dst, step,
                        chunk, std::move(name)));
}

int Builder::copy(Resource res, Region src, Region dst, int step, int chunk, std::string name) {
  return emit(make_task(TaskKind::copy, res, src, dst, step, chunk, std::move(name)));
}

void Builder::fuse(int task, int group) {
  if (task >= 0) s_.tasks.at(static_cast<std::size_t>(task)).fused = group;
}

Schedule Builder::finish() && {
  int engines = 1;
  for (const Task& t : s_.tasks)
    if (t.resource.kind == ResourceKind::copy_engine)
      engines = std::max(engines, t.resource.index + 1);
  s_.copy_engines = engines;
  assign_launches(s_);
  return std::move(s_);
}

void declare_operands(Builder& b, const workload::OperatorSpec& op, int r, bool input_only) {
  const workload::Block x = workload::input_block(op, r);
  b.buffer(r, "x", x.rows, x.cols, BufferRole::input);
  if (input_only) return;
  const workload::Block w = workload::weight_block(op, r);
  const workload::Block y = workload::output_block(op, r);
  b.buffer(r, "w", w.rows, w.cols, BufferRole::weight);
  b.buffer(r, "y", y.rows, y.cols, BufferRole::output);
}

}  // namespace compass::schedule::detail
