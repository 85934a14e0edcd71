#include "compass/core/result.hpp"

#include <gtest/gtest.h>

#include "compass/core/dtype.hpp"

namespace compass {
namespace {

Result<int> parse_positive(int v) {
  if (v <= 0) return make_error("value: must be positive, got {}", v);
  return v;
}

Result<int> doubled(int v) {
  COMPASS_ASSIGN(int x, parse_positive(v));
  return 2 * x;
}

Status check_even(int v) {
  COMPASS_TRY(parse_positive(v));
  if (v % 2) return make_error("value: {} is odd", v);
  return Status::success();
}

TEST(Result, ValueAndError) {
  auto ok = parse_positive(3);
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(*ok, 3);
  auto bad = parse_positive(-1);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message, "value: must be positive, got -1");
}

TEST(Result, AssignPropagates) {
  EXPECT_EQ(*doubled(4), 8);
  EXPECT_EQ(doubled(0).error().message, "value: must be positive, got 0");
}

TEST(Result, TryPropagates) {
  EXPECT_TRUE(check_even(4).ok());
  EXPECT_EQ(check_even(3).error().message, "value: 3 is odd");
  EXPECT_EQ(check_even(-2).error().message, "value: must be positive, got -2");
}

TEST(Result, ValueOnErrorIsInternalError) {
  auto bad = parse_positive(0);
  EXPECT_THROW((void)bad.value(), InternalError);
}

TEST(Check, ThrowsWithLocation) {
  try {
    COMPASS_CHECK(1 + 1 == 3, "arithmetic {}", "broke");
    FAIL() << "no throw";
  } catch (const InternalError& e) {
    std::string what = e.what();
    EXPECT_NE(what.find("1 + 1 == 3"), std::string::npos);
    EXPECT_NE(what.find("arithmetic broke"), std::string::npos);
  }
}

TEST(DType, NamesAndSizes) {
  for (DType t : {DType::fp32, DType::fp16, DType::bf16, DType::fp8}) {
    auto parsed = parse_dtype(to_string(t));
    ASSERT_TRUE(parsed.has_value());
    EXPECT_EQ(*parsed, t);
  }
  EXPECT_EQ(dtype_bytes(DType::fp32), 4);
  EXPECT_EQ(dtype_bytes(DType::bf16), 2);
  EXPECT_EQ(dtype_bytes(DType::fp8), 1);
  EXPECT_FALSE(parse_dtype("int4").has_value());
}

}  // namespace
}  // namespace compass
