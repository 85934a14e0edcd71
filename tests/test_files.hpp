#pragma once
// Reading files in tests: a whole file as bytes, and the recorded inputs under tests/data/.

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

namespace compass::testing {

/// The whole file (binary), or "" when it cannot be read.
inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

/// The whole file into `out`; false (and `out` untouched) when it cannot be opened.
inline bool read_file_if_exists(const std::string& path, std::string& out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream s;
  s << in.rdbuf();
  out = s.str();
  return true;
}

/// Lines in a text, the last one counted whether or not it ends in '\n'.
inline int count_lines(const std::string& s) {
  int n = 0;
  for (char c : s) n += c == '\n' ? 1 : 0;
  return n + (!s.empty() && s.back() != '\n' ? 1 : 0);
}

/// tests/data/<rel> of the source tree; a test failure when it is missing or empty.
inline std::string test_data(const std::string& rel) {
  std::string text = read_file(std::string(COMPASS_SOURCE_DIR) + "/tests/data/" + rel);
  EXPECT_FALSE(text.empty()) << rel;
  return text;
}

}  // namespace compass::testing
