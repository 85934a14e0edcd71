// Placeholder: the 'validate' verb is not implemented yet.
#include "compass/cli/common.hpp"

namespace compass::cli {

void add_validate_verb(CLI::App& app) {
  auto* sub = app.add_subcommand("validate", "(not implemented yet)");
  sub->allow_extras();
  sub->callback([] { throw UsageError("'validate' is not implemented yet"); });
}

}  // namespace compass::cli
