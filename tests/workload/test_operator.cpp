#include <gtest/gtest.h>

#include "compass/workload/operator.hpp"

namespace compass::workload {
namespace {

OperatorSpec op(OpKind kind, std::int64_t m, std::int64_t n, std::int64_t k, int tp) {
  OperatorSpec o;
  o.kind = kind;
  o.m = m;
  o.n = n;
  o.k = k;
  o.tp = tp;
  o.dtype = DType::bf16;
  return o;
}

TEST(Operator, KindNamesRoundTrip) {
  for (OpKind k : {OpKind::ag_gemm, OpKind::gemm_rs, OpKind::gemm_ar}) {
    EXPECT_EQ(parse_op_kind(to_string(k)), k);
  }
  EXPECT_EQ(to_string(OpKind::ag_gemm), "ag_gemm");
  EXPECT_FALSE(parse_op_kind("allgather").has_value());
  EXPECT_FALSE(parse_op_kind("").has_value());
}

TEST(Operator, AgGemmShapes) {
  const auto o = op(OpKind::ag_gemm, 4096, 12288, 4096, 8);
  ASSERT_TRUE(validate(o).ok());
  const RankShapes s = rank_shapes(o);
  EXPECT_EQ(s.x_rows, 512);
  EXPECT_EQ(s.x_cols, 4096);
  EXPECT_EQ(s.w_rows, 4096);
  EXPECT_EQ(s.w_cols, 1536);
  EXPECT_EQ(s.gemm_m, 4096);
  EXPECT_EQ(s.gemm_n, 1536);
  EXPECT_EQ(s.gemm_k, 4096);
  EXPECT_EQ(s.y_rows, 4096);
  EXPECT_EQ(s.y_cols, 1536);
  EXPECT_EQ(s.comm_bytes, 4096LL * 4096 * 2);
}

TEST(Operator, GemmRsShapes) {
  const auto o = op(OpKind::gemm_rs, 8192, 4096, 11008, 8);
  ASSERT_TRUE(validate(o).ok());
  const RankShapes s = rank_shapes(o);
  EXPECT_EQ(s.x_rows, 8192);
  EXPECT_EQ(s.x_cols, 1376);
  EXPECT_EQ(s.w_rows, 1376);
  EXPECT_EQ(s.w_cols, 4096);
  EXPECT_EQ(s.gemm_m, 8192);
  EXPECT_EQ(s.gemm_n, 4096);
  EXPECT_EQ(s.gemm_k, 1376);
  EXPECT_EQ(s.y_rows, 1024);
  EXPECT_EQ(s.y_cols, 4096);
  EXPECT_EQ(s.comm_bytes, 8192LL * 4096 * 2);
}

TEST(Operator, GemmArShapesKeepFullOutput) {
  auto o = op(OpKind::gemm_ar, 1000, 4096, 4096, 4);  // M need not divide by tp
  o.dtype = DType::fp32;
  ASSERT_TRUE(validate(o).ok());
  const RankShapes s = rank_shapes(o);
  EXPECT_EQ(s.x_rows, 1000);
  EXPECT_EQ(s.x_cols, 1024);
  EXPECT_EQ(s.gemm_k, 1024);
  EXPECT_EQ(s.y_rows, 1000);
  EXPECT_EQ(s.y_cols, 4096);
  EXPECT_EQ(s.comm_bytes, 1000LL * 4096 * 4);
}

TEST(Operator, TpOneIsTheWholeGemm) {
  const RankShapes s = rank_shapes(op(OpKind::gemm_rs, 7, 5, 3, 1));
  EXPECT_EQ(s.gemm_m, 7);
  EXPECT_EQ(s.gemm_n, 5);
  EXPECT_EQ(s.gemm_k, 3);
  EXPECT_EQ(s.y_rows, 7);
}

TEST(Operator, FlopsAndDescribe) {
  const auto o = op(OpKind::ag_gemm, 2048, 7680, 2560, 2);
  EXPECT_DOUBLE_EQ(total_flops(o), 2.0 * 2048 * 7680 * 2560);
  EXPECT_EQ(describe(o), "ag_gemm M=2048 N=7680 K=2560 tp=2 bf16");
}

void expect_error(const OperatorSpec& o, const std::string& text) {
  const Status s = validate(o);
  ASSERT_FALSE(s.ok()) << describe(o);
  EXPECT_NE(s.error().message.find(text), std::string::npos) << s.error().message;
}

TEST(Operator, ValidationErrorsNameTheValue) {
  expect_error(op(OpKind::ag_gemm, 1000, 3000, 64, 3), "M=1000 is not divisible by tp=3");
  expect_error(op(OpKind::ag_gemm, 999, 1000, 64, 3), "N=1000 is not divisible by tp=3");
  expect_error(op(OpKind::gemm_rs, 1000, 64, 3000, 3), "M=1000 is not divisible by tp=3");
  expect_error(op(OpKind::gemm_rs, 999, 64, 1000, 3), "K=1000 is not divisible by tp=3");
  expect_error(op(OpKind::gemm_ar, 999, 64, 1000, 3), "K=1000 is not divisible by tp=3");
  expect_error(op(OpKind::ag_gemm, 0, 8, 8, 1), "M=0");
  expect_error(op(OpKind::ag_gemm, 8, -8, 8, 1), "N=-8");
  expect_error(op(OpKind::ag_gemm, 8, 8, 0, 1), "K=0");
  expect_error(op(OpKind::ag_gemm, 8, 8, 8, 0), "tp=0");
  expect_error(op(OpKind::ag_gemm, 8, 8, 8, -2), "tp=-2");
  expect_error(op(OpKind::ag_gemm, std::int64_t{1} << 40, 8, 8, 1), "too large");
  expect_error(op(OpKind::ag_gemm, std::int64_t{1} << 30, std::int64_t{1} << 30, 8, 1),
               "too large");
}

TEST(Operator, ValidationAcceptsNonDividingDimsWhereNotSplit) {
  EXPECT_TRUE(validate(op(OpKind::ag_gemm, 1024, 1024, 1001, 8)).ok());  // K is not split
  EXPECT_TRUE(validate(op(OpKind::gemm_rs, 1024, 1001, 1024, 8)).ok());  // N is not split
  EXPECT_TRUE(validate(op(OpKind::gemm_ar, 1001, 1001, 1024, 8)).ok());
}

TEST(Operator, RankShapesOnInvalidIsABug) {
  EXPECT_THROW(rank_shapes(op(OpKind::ag_gemm, 1000, 3000, 64, 3)), InternalError);
}

}  // namespace
}  // namespace compass::workload
