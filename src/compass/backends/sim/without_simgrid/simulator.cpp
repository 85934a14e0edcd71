// The SimGrid backend in a build without SimGrid (-DCOMPASS_WITH_SIM=OFF): it says so.
#include "compass/backends/sim/simulator.hpp"

namespace compass::backends::sim {

bool compiled_in() { return false; }

Result<SimResult> simulate(const hardware::Profile&, const schedule::Schedule&,
                           const SimOptions&) {
  return make_error("this build has no simulator (configure with -DCOMPASS_WITH_SIM=ON)");
}

}  // namespace compass::backends::sim
