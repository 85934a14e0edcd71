// Placeholder: the 'run' verb is not implemented yet.
#include "compass/cli/common.hpp"

namespace compass::cli {

void add_run_verb(CLI::App& app) {
  auto* sub = app.add_subcommand("run", "(not implemented yet)");
  sub->allow_extras();
  sub->callback([] { throw UsageError("'run' is not implemented yet"); });
}

}  // namespace compass::cli
