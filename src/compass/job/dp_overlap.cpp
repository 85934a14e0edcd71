#include "compass/job/dp_overlap.hpp"

#include <algorithm>

namespace compass::job {

double exposed_reduce_s(const std::vector<Bucket>& ready, double compute_end_s) {
  double stream = 0;
  for (const Bucket& b : ready) stream = std::max(stream, b.at_s) + b.comm_s;
  return std::max(0.0, stream - compute_end_s);
}

double exposed_gather_s(const std::vector<Bucket>& needed) {
  double stream = 0, delay = 0;
  for (const Bucket& b : needed) {
    stream += b.comm_s;
    delay = std::max(delay, stream - b.at_s);
  }
  return std::max(0.0, delay);
}

}  // namespace compass::job
