// The compass application: every verb registered on one CLI11 app, parsed and run, with bad
// input reported as one line on stderr and exit code 2. main() and the Python module both call
// run_app, so they share every default and every message.

#include <cstdio>
#include <exception>
#include <string>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "compass/cli/app.hpp"
#include "compass/cli/common.hpp"

namespace compass::cli {

namespace {

// Error messages echo user input (file names, flag values): control characters are shown as
// \xNN so that they cannot drive the terminal, and the message stays one line.
std::string printable(const std::string& text) {
  std::string out;
  for (unsigned char ch : text) {
    if (ch < 0x20 || ch == 0x7f)
      out += fmt::format("\\x{:02x}", ch);
    else
      out += static_cast<char>(ch);
  }
  return out;
}

}  // namespace

int run_app(int argc, char** argv) {
  CLI::App app{
      "Compass: plans, simulates and runs communication/computation overlap for "
      "tensor-parallel LLM training.",
      "compass"};
  app.set_version_flag("--version", std::string("compass ") + COMPASS_VERSION);
  app.require_subcommand(1);
  app.fallthrough(false);

  add_list_verb(app);
  add_topo_verb(app);
  add_schedule_verb(app);
  add_run_verb(app);
  add_op_verb(app);
  add_plan_verb(app);
  add_sweep_verb(app);
  add_simulate_verb(app);
  add_calibrate_verb(app);
  add_validate_verb(app);
  add_profile_verb(app);
  add_discover_verb(app);
  add_doctor_verb(app);
  add_export_verb(app);
  add_plot_verb(app);
  add_search_verb(app);

  // Name an unknown verb ourselves: CLI11 would only say that a subcommand is required.
  if (argc > 1 && argv[1][0] != '-') {
    bool known = false;
    for (const auto* sub : app.get_subcommands([](const CLI::App*) { return true; }))
      known = known || sub->get_name() == argv[1];
    if (!known) {
      fmt::print(stderr, "compass: error: unknown verb '{}' (see 'compass --help')\n",
                 printable(argv[1]));
      return 2;
    }
  }

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // CLI11 prints multi-line help for some errors; keep to one line plus a hint.
    fmt::print(stderr, "compass: error: {} (see 'compass --help')\n", printable(e.what()));
    return 2;
  } catch (const ExitCode& e) {
    return e.code;
  } catch (const UsageError& e) {
    fmt::print(stderr, "compass: error: {}\n", printable(e.what()));
    return 2;
  } catch (const compass::InternalError& e) {
    fmt::print(stderr, "compass: {}\n", printable(e.what()));
    return 2;
  } catch (const std::bad_alloc&) {
    fmt::print(stderr, "compass: error: out of memory\n");
    return 2;
  } catch (const std::exception& e) {
    fmt::print(stderr, "compass: error: {}\n", printable(e.what()));
    return 2;
  }
  return 0;
}

}  // namespace compass::cli
