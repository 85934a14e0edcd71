#pragma once
// A small discrete-event follower over a plain task list: tasks run on serial resources in
// the order each resource lists them, and a task starts when its resource is free and every
// task it depends on has ended (plus the dependency's lag, e.g. a transfer). The list is plain
// data, so other judges (a simulator) can replay the same tasks.

#include <initializer_list>
#include <span>
#include <vector>

#include "compass/core/result.hpp"

namespace compass::job {

/// Task `task` must end, then `lag_s` pass, before the dependent task starts.
struct Dependency {
  int task = 0;
  double lag_s = 0;
  bool operator==(const Dependency&) const = default;
};

struct Task {
  int resource = 0;  ///< a serial resource (a pipeline stage's GPU)
  double duration_s = 0;
  bool operator==(const Task&) const = default;
};

/// Tasks, their dependencies and, per resource, the order in which it runs its tasks (indices
/// into tasks). The dependencies of all tasks sit in one array, task t's from dep_begin[t] to
/// dep_begin[t + 1] (an iteration's list has tens of thousands of tasks: one allocation each
/// would cost more than following them).
struct TaskList {
  std::vector<Task> tasks;
  std::vector<Dependency> deps;
  std::vector<int> dep_begin{0};        ///< tasks.size() + 1 entries, non-decreasing
  std::vector<std::vector<int>> order;  ///< order[r]: the tasks of resource r, in run order
  /// Appends a task with its dependencies; returns its index.
  int add(const Task& task, std::initializer_list<Dependency> task_deps);
  /// Task t's dependencies (t must have been added).
  std::span<const Dependency> deps_of(int t) const {
    return {deps.data() + dep_begin[t], deps.data() + dep_begin[t + 1]};
  }
  bool operator==(const TaskList&) const = default;
};

struct Followed {
  std::vector<double> start_s;         ///< per task
  std::vector<double> end_s;           ///< per task
  std::vector<double> resource_end_s;  ///< per resource: when its last task ends (0 if none)
  std::vector<double> busy_s;          ///< per resource: sum of its tasks' durations
  double makespan_s = 0;
};

/// Follows the list event by event. Errors: dep_begin not matching the tasks and deps, a task
/// index out of range, a task listed on a resource other than its own or not exactly once, or a
/// cycle (the order and the dependencies wait on each other: the error names a task that can
/// never start).
Result<Followed> follow(const TaskList& list);

}  // namespace compass::job
