// Placeholder: the 'plan' verb is not implemented yet.
#include "compass/cli/common.hpp"

namespace compass::cli {

void add_plan_verb(CLI::App& app) {
  auto* sub = app.add_subcommand("plan", "(not implemented yet)");
  sub->allow_extras();
  sub->callback([] { throw UsageError("'plan' is not implemented yet"); });
}

}  // namespace compass::cli
