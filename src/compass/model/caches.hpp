#pragma once
// The model's memo tables as an object the caller owns (the planner, a sweep, a benchmark
// iteration), instead of process-wide state: ring-step patterns, released-flow patterns, the
// all-to-all congestion of a pattern, the tree patterns' estimates (per profile), and the event
// loop's buffers.

#include <memory>

namespace compass::model {

namespace detail {
struct CacheTables;  // defined in model/cache_tables.hpp, used only inside model/
}  // namespace detail

/// Memo tables and scratch buffers of the model. A hit returns the same bits a fresh computation
/// would, so what a Caches holds never changes a result, only how long it takes; a new (or
/// cleared) Caches plans from a cold start. Not thread-safe: one Caches per thread. Move-only.
class Caches {
 public:
  Caches();
  ~Caches();
  Caches(Caches&&) noexcept;
  Caches& operator=(Caches&&) noexcept;
  Caches(const Caches&) = delete;
  Caches& operator=(const Caches&) = delete;

  /// Empties every table (the next estimate starts cold); results do not change.
  void clear();

  /// The tables themselves, for the model's own functions.
  detail::CacheTables& tables() { return *tables_; }

 private:
  std::unique_ptr<detail::CacheTables> tables_;
};

}  // namespace compass::model
