#pragma once
// The whole compass command line as a function: main() calls it, and so does the fuzzer of the
// argument parsing.

namespace compass::cli {

/// Parses argv, runs the verb and returns the exit code (0, 1 for a failed check, 2 for bad
/// input); every error is one line on stderr.
int run_app(int argc, char** argv);

}  // namespace compass::cli
