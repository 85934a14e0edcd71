// The compass application: every verb registered on one CLI11 app, parsed and run, with bad
// input reported as one line on stderr and exit code 2. main() and the Python module both call
// run_app, so they share every default and every message.

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <iostream>
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

// One error line on stderr; when stderr itself refuses it nothing more can be said, and the
// exit code (2) is the whole report.
void report(const std::string& line) noexcept { try_write_stderr(line); }

// Parses and runs the verb; every error is reported here and becomes exit code 2.
int parse_and_run(CLI::App& app, int argc, char** argv) {
  try {
    // Name an unknown verb ourselves: CLI11 would only say that a subcommand is required.
    if (argc > 1 && argv[1][0] != '-') {
      bool known = false;
      for (const auto* sub : app.get_subcommands([](const CLI::App*) { return true; }))
        known = known || sub->get_name() == argv[1];
      if (!known) {
        report(fmt::format("compass: error: unknown verb '{}' (see 'compass --help')\n",
                           printable(argv[1])));
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
    }
  } catch (const CLI::ParseError& e) {
    // CLI11 prints multi-line help for some errors; keep to one line plus a hint.
    report(fmt::format("compass: error: {} (see 'compass --help')\n", printable(e.what())));
    return 2;
  } catch (const ExitCode& e) {
    return e.code;
  } catch (const StderrGone&) {
    return 2;
  } catch (const StdoutError& e) {
    report(fmt::format("compass: error: {}\n", printable(e.what())));
    return 2;
  } catch (const UsageError& e) {
    report(fmt::format("compass: error: {}\n", printable(e.what())));
    return 2;
  } catch (const compass::InternalError& e) {
    report(fmt::format("compass: {}\n", printable(e.what())));
    return 2;
  } catch (const std::bad_alloc&) {
    report("compass: error: out of memory\n");
    return 2;
  } catch (const std::exception& e) {
    report(fmt::format("compass: error: {}\n", printable(e.what())));
    return 2;
  }
  return 0;
}

}  // namespace

int run_app(int argc, char** argv) {
  // A stream that failed in an earlier in-process run (the Python module) starts clean.
  std::clearerr(stdout);
  std::clearerr(stderr);
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

  int rc = parse_and_run(app, argc, argv);
  // Output still in stdout's buffer (help text included) must reach it: a full or closed stdout
  // is an error, never exit code 0 with the output lost.
  errno = 0;
  bool stdout_failed = std::fflush(stdout) != 0;
  const int e = errno;
  std::cout.flush();  // CLI11's help and version text (the same buffer: synced with stdio)
  stdout_failed = stdout_failed || std::ferror(stdout) || !std::cout;
  if (stdout_failed && rc != 2) {
    report(fmt::format("compass: error: writing to stdout failed: {}\n",
                       e != 0 ? std::strerror(e) : "I/O error"));
    rc = 2;
  }
  // stderr that refused a message or the progress: the output is incomplete.
  if (std::ferror(stderr) && rc == 0) rc = 2;
  return rc;
}

}  // namespace compass::cli
