// Placeholder: the 'simulate' verb is not implemented yet.
#include "compass/cli/common.hpp"

namespace compass::cli {

void add_simulate_verb(CLI::App& app) {
  auto* sub = app.add_subcommand("simulate", "(not implemented yet)");
  sub->allow_extras();
  sub->callback([] { throw UsageError("'simulate' is not implemented yet"); });
}

}  // namespace compass::cli
