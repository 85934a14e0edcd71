// The job simulation in a build without SimGrid (-DCOMPASS_WITH_SIM=OFF): it says so.
#include "compass/backends/sim/job_sim.hpp"

namespace compass::backends::sim {

Result<JobSimResult> simulate_job(const job::Cluster&, const workload::ModelConfig&,
                                  const job::StepResult&, const job::StepOptions&, JobSimScope) {
  return make_error("this build has no simulator (configure with -DCOMPASS_WITH_SIM=ON)");
}

const char* to_string(JobSimScope scope) {
  return scope == JobSimScope::cluster ? "cluster" : "replica";
}

}  // namespace compass::backends::sim
