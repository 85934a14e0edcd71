// Placeholder: the 'calibrate' verb is not implemented yet.
#include "compass/cli/common.hpp"

namespace compass::cli {

void add_calibrate_verb(CLI::App& app) {
  auto* sub = app.add_subcommand("calibrate", "(not implemented yet)");
  sub->allow_extras();
  sub->callback([] { throw UsageError("'calibrate' is not implemented yet"); });
}

}  // namespace compass::cli
