// The one reader of JSON texts: where a text is malformed, too deep, or names a key twice.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>

#include "compass/core/json_text.hpp"

namespace compass {
namespace {

std::string error_of(const std::string& text) {
  Result<nlohmann::json> r = parse_json_text(text, "f.json");
  return r.ok() ? std::string("(parsed)") : r.error().message;
}

TEST(JsonText, ParsesWhatJsonAllows) {
  Result<nlohmann::json> r =
      parse_json_text(R"({"a": [1, {"b": 2}, {"b": 3}], "c": {"b": 4}})", "f.json");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ((*r)["a"][2]["b"], 3);
  EXPECT_EQ((*r)["c"]["b"], 4);
  // The same key in sibling objects, and in an object and its parent, is not a duplicate.
  EXPECT_EQ(error_of(R"({"b": {"b": {"b": 1}}, "x": [{"b": 1}, {"b": 2}]})"), "(parsed)");
  EXPECT_EQ(error_of("[]"), "(parsed)");
  EXPECT_EQ(error_of("3"), "(parsed)");
}

TEST(JsonText, AKeyGivenTwiceIsAnErrorNamingIt) {
  // The parser alone keeps the last value and drops the first without a word.
  EXPECT_EQ(nlohmann::json::parse(R"({"layers": 32, "layers": 16})")["layers"], 16);
  EXPECT_EQ(error_of(R"({"layers": 32, "layers": 16})"), "f.json: duplicate key 'layers'");
  EXPECT_EQ(error_of(R"({"nic": {"gbps": 400, "count": 8, "gbps": 200}})"),
            "f.json: duplicate key 'gbps' (in 'nic')");
  // An object in an array is named by the array's key.
  EXPECT_EQ(error_of(R"({"links": [{"name": "a"}, {"name": "b", "bw": 1, "bw": 2}]})"),
            "f.json: duplicate key 'bw' (in 'links')");
  // After an inner object closes, its keys no longer count, and the outer ones still do.
  EXPECT_EQ(error_of(R"({"a": {"x": 1}, "x": 2, "a": 3})"), "f.json: duplicate key 'a'");
  // Keys compare as decoded strings.
  EXPECT_EQ(error_of(R"({"a": 1, "\u0061": 2})"), "f.json: duplicate key 'a'");
}

TEST(JsonText, MalformedTextNamesItsLine) {
  EXPECT_EQ(error_of("{\n  \"a\": 1,\n  \"b\": ,\n}")
                .rfind("f.json: line 3: malformed JSON: syntax "
                       "error while parsing value",
                       0),
            0u)
      << error_of("{\n  \"a\": 1,\n  \"b\": ,\n}");
  EXPECT_EQ(error_of("").rfind("f.json: line 1: malformed JSON: ", 0), 0u) << error_of("");
  EXPECT_EQ(error_of(R"({"a": 1e999})"), "f.json: malformed JSON: number overflow parsing '1e999'");
}

TEST(JsonText, NestingIsBounded) {
  const std::string ok = std::string(kMaxJsonDepth, '[') + std::string(kMaxJsonDepth, ']');
  EXPECT_EQ(error_of(ok), "(parsed)");
  const std::string deep =
      std::string(kMaxJsonDepth + 1, '[') + std::string(kMaxJsonDepth + 1, ']');
  EXPECT_EQ(error_of(deep), "f.json: malformed JSON: nested deeper than 64 levels");
  // Brackets inside strings do not count.
  EXPECT_EQ(error_of("[\"" + std::string(1000, '[') + "\"]"), "(parsed)");
}

TEST(JsonText, IntegersMustBeIntegersInRange) {
  auto as_int = [](const char* text, std::int64_t min, std::int64_t max) {
    return json_integer(nlohmann::json::parse(text), min, max);
  };
  EXPECT_EQ(as_int("7", 0, 10), 7);
  EXPECT_EQ(as_int("-3", -5, 10), -3);
  EXPECT_FALSE(as_int("2.5", 0, 10).has_value());
  EXPECT_FALSE(as_int("\"7\"", 0, 10).has_value());
  EXPECT_FALSE(as_int("11", 0, 10).has_value());
  EXPECT_FALSE(as_int("-1", 0, 10).has_value());
  // Past the signed range: read as a signed value it would wrap to -1.
  EXPECT_FALSE(as_int("18446744073709551615", -10, 10).has_value());
  EXPECT_EQ(as_int("9223372036854775807", 0, std::numeric_limits<std::int64_t>::max()),
            std::numeric_limits<std::int64_t>::max());
}

TEST(JsonText, TheLibrarysPrefixIsDropped) {
  EXPECT_EQ(without_json_prefix("[json.exception.type_error.302] type must be number"),
            "type must be number");
  EXPECT_EQ(without_json_prefix("no prefix"), "no prefix");
}

}  // namespace
}  // namespace compass
