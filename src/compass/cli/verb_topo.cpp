// Placeholder: the 'topo' verb is not implemented yet.
#include "compass/cli/common.hpp"

namespace compass::cli {

void add_topo_verb(CLI::App& app) {
  auto* sub = app.add_subcommand("topo", "(not implemented yet)");
  sub->allow_extras();
  sub->callback([] { throw UsageError("'topo' is not implemented yet"); });
}

}  // namespace compass::cli
