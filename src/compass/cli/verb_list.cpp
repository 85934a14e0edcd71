// Placeholder: the 'list' verb is not implemented yet.
#include "compass/cli/common.hpp"

namespace compass::cli {

void add_list_verb(CLI::App& app) {
  auto* sub = app.add_subcommand("list", "(not implemented yet)");
  sub->allow_extras();
  sub->callback([] { throw UsageError("'list' is not implemented yet"); });
}

}  // namespace compass::cli
