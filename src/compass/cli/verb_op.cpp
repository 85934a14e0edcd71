// Placeholder: the 'op' verb is not implemented yet.
#include "compass/cli/common.hpp"

namespace compass::cli {

void add_op_verb(CLI::App& app) {
  auto* sub = app.add_subcommand("op", "(not implemented yet)");
  sub->allow_extras();
  sub->callback([] { throw UsageError("'op' is not implemented yet"); });
}

}  // namespace compass::cli
