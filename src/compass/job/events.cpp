#include "compass/job/events.hpp"

#include <algorithm>

namespace compass::job {

Result<Followed> follow(const TaskList& list) {
  const int n = static_cast<int>(list.tasks.size());
  const int resources = static_cast<int>(list.order.size());
  std::vector<int> seen(n, 0);
  for (int r = 0; r < resources; ++r)
    for (int t : list.order[r]) {
      if (t < 0 || t >= n) return make_error("resource {} lists task {} of {}", r, t, n);
      if (list.tasks[t].resource != r)
        return make_error("task {} ({}) runs on resource {} but is listed on {}", t,
                          list.tasks[t].label, list.tasks[t].resource, r);
      ++seen[t];
    }
  for (int t = 0; t < n; ++t) {
    if (seen[t] != 1)
      return make_error("task {} ({}) is listed {} times", t, list.tasks[t].label, seen[t]);
    for (const Dependency& d : list.tasks[t].deps)
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
        for (const Dependency& d : task.deps) {
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
          return make_error("task {} ({}) can never start: its dependencies wait on it", t,
                            list.tasks[t].label);
        }
    }
  }
  for (double e : f.resource_end_s) f.makespan_s = std::max(f.makespan_s, e);
  return f;
}

}  // namespace compass::job
