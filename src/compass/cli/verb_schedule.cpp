// Placeholder: the 'schedule' verb is not implemented yet.
#include "compass/cli/common.hpp"

namespace compass::cli {

void add_schedule_verb(CLI::App& app) {
  auto* sub = app.add_subcommand("schedule", "(not implemented yet)");
  sub->allow_extras();
  sub->callback([] { throw UsageError("'schedule' is not implemented yet"); });
}

}  // namespace compass::cli
