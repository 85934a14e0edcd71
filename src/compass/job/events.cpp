#include "compass/job/events.hpp"

#include <algorithm>

namespace compass::job {

int TaskList::add(const Task& task, std::initializer_list<Dependency> task_deps) {
  tasks.push_back(task);
  deps.insert(deps.end(), task_deps);
  dep_begin.push_back(static_cast<int>(deps.size()));
  return static_cast<int>(tasks.size()) - 1;
}

Result<Followed> follow(const TaskList& list) {
  const int n = static_cast<int>(list.tasks.size());
  if (list.dep_begin.size() != list.tasks.size() + 1 || list.dep_begin.front() != 0 ||
      list.dep_begin.back() != static_cast<int>(list.deps.size()) ||
      !std::is_sorted(list.dep_begin.begin(), list.dep_begin.end()))
    return make_error("the dependency index of {} tasks does not match their {} dependencies", n,
                      list.deps.size());
  const int resources = static_cast<int>(list.order.size());
  std::vector<int> seen(n, 0);
  for (int r = 0; r < resources; ++r)
    for (int t : list.order[r]) {
      if (t < 0 || t >= n) return make_error("resource {} lists task {} of {}", r, t, n);
      if (list.tasks[t].resource != r)
        return make_error("task {} runs on resource {} but is listed on {}", t,
                          list.tasks[t].resource, r);
      ++seen[t];
    }
  for (int t = 0; t < n; ++t) {
    if (seen[t] != 1)
      return make_error("task {} (resource {}) is listed {} times", t, list.tasks[t].resource,
                        seen[t]);
    for (const Dependency& d : list.deps_of(t))
      if (d.task < 0 || d.task >= n)
        return make_error("task {} depends on task {} of {}", t, d.task, n);
  }

  Followed f;
  f.start_s.assign(n, 0);
  f.end_s.assign(n, 0);
  f.resource_end_s.assign(resources, 0);
  f.busy_s.assign(resources, 0);
  std::vector<char> done(n, 0);
  std::vector<std::size_t> next(resources, 0);
  int finished = 0;
  // Each sweep starts every resource's head task whose dependencies have ended; a sweep that
  // starts nothing while tasks remain is a deadlock.
  while (finished < n) {
    bool progressed = false;
    for (int r = 0; r < resources; ++r) {
      while (next[r] < list.order[r].size()) {
        const int t = list.order[r][next[r]];
        const Task& task = list.tasks[t];
        double ready = f.resource_end_s[r];
        bool blocked = false;
        for (const Dependency& d : list.deps_of(t)) {
          if (!done[d.task]) {
            blocked = true;
            break;
          }
          ready = std::max(ready, f.end_s[d.task] + d.lag_s);
        }
        if (blocked) break;
        f.start_s[t] = ready;
        f.end_s[t] = ready + task.duration_s;
        f.resource_end_s[r] = f.end_s[t];
        f.busy_s[r] += task.duration_s;
        done[t] = 1;
        ++next[r];
        ++finished;
        progressed = true;
      }
    }
    if (!progressed) {
      for (int r = 0; r < resources; ++r)
        if (next[r] < list.order[r].size()) {
          const int t = list.order[r][next[r]];
          return make_error("task {} (resource {}) can never start: its dependencies wait on it", t,
                            r);
        }
    }
  }
  for (double e : f.resource_end_s) f.makespan_s = std::max(f.makespan_s, e);
  return f;
}

}  // namespace compass::job
