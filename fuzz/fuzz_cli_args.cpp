// libFuzzer harness for the command-line parsing: the input, split at newlines, is the
// argument list of `compass`. Any arguments must end in an exit code (0, 1 or 2), never a
// crash, uncaught exception or undefined behaviour. Verbs that do real work for seconds
// (run, calibrate, validate, simulate) are left out, and so is every argument with a '/': the
// harness runs in a fresh directory, so files the verbs write stay there.
// Seeds: fuzz/corpus/cli.

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "compass/cli/app.hpp"

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  char dir[] = "/tmp/compass-fuzz-cli-XXXXXX";
  if (::mkdtemp(dir) == nullptr || ::chdir(dir) != 0) std::abort();
  // The verbs' tables are not the point; keep the fuzzer's output readable.
  if (!std::freopen("/dev/null", "w", stdout)) std::abort();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size > 512) return 0;
  std::vector<std::string> args{"compass"};
  std::string cur;
  for (std::size_t i = 0; i < size; ++i) {
    const char c = static_cast<char>(data[i]);
    if (c == '/' || c == '\0') return 0;
    if (c == '\n') {
      args.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  args.push_back(cur);
  if (args.size() > 1) {
    const std::string& verb = args[1];
    if (verb == "run" || verb == "calibrate" || verb == "validate" || verb == "simulate")
      return 0;
  }
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const int rc = compass::cli::run_app(static_cast<int>(args.size()), argv.data());
  if (rc != 0 && rc != 1 && rc != 2) {
    std::fprintf(stderr, "unexpected exit code %d\n", rc);
    __builtin_trap();
  }
  return 0;
}
