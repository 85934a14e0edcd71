// Placeholder: the 'sweep' verb is not implemented yet.
#include "compass/cli/common.hpp"

namespace compass::cli {

void add_sweep_verb(CLI::App& app) {
  auto* sub = app.add_subcommand("sweep", "(not implemented yet)");
  sub->allow_extras();
  sub->callback([] { throw UsageError("'sweep' is not implemented yet"); });
}

}  // namespace compass::cli
