#pragma once
// A small discrete-event follower over a plain task list: tasks run on serial resources in
// the order each resource lists them, and a task starts when its resource is free and every
// task it depends on has ended (plus the dependency's lag, e.g. a transfer). The list is plain
// data, so other judges (a simulator) can replay the same tasks.

#include <string>
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
  std::vector<Dependency> deps;
  std::string label;  ///< e.g. "F s0 c1 m3" (for reports and replay)
  bool operator==(const Task&) const = default;
};

/// Tasks and, per resource, the order in which it runs its tasks (indices into tasks).
struct TaskList {
  std::vector<Task> tasks;
  std::vector<std::vector<int>> order;  ///< order[r]: the tasks of resource r, in run order
  bool operator==(const TaskList&) const = default;
};

struct Followed {
  std::vector<double> start_s;         ///< per task
  std::vector<double> end_s;           ///< per task
  std::vector<double> resource_end_s;  ///< per resource: when its last task ends (0 if none)
  std::vector<double> busy_s;          ///< per resource: sum of its tasks' durations
  double makespan_s = 0;
};

/// Follows the list event by event. Errors: a task index out of range, a task listed on a
/// resource other than its own or not exactly once, or a cycle (the order and the dependencies
/// wait on each other: the error names a task that can never start).
Result<Followed> follow(const TaskList& list);

}  // namespace compass::job
