#pragma once
// compass calibrate --from-nccl-tests LOG...: fits a profile's links to nccl-tests logs.

#include <string>
#include <vector>

#include "compass/cli/common.hpp"

namespace compass::cli {

struct NcclFitArgs {
  std::vector<std::string> logs;
  std::string profile;  ///< preset or file; default a6000x8
  std::string out;      ///< optional: write the fitted profile
  bool force = false;
  JsonOutput json;
};

void run_calibrate_from_nccl_tests(const NcclFitArgs& args);

}  // namespace compass::cli
