#include "common/base/status.h"

#include <gtest/gtest.h>

namespace tandem {
namespace {

StatusOr<int> ParsePositive(int x) {
  if (x <= 0) return InvalidArgumentError("x must be positive, got " + std::to_string(x));
  return x;
}

Status UsesAssign(int x, int* out) {
  TANDEM_ASSIGN_OR_RETURN(*out, ParsePositive(x));
  return Status::Ok();
}

Status UsesReturnIfError(int x) {
  TANDEM_RETURN_IF_ERROR(ParsePositive(x));
  return Status::Ok();
}

TEST(StatusTest, OkByDefault) {
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kOk);
  EXPECT_EQ(s.ToString(), "OK");
}

TEST(StatusTest, CarriesCodeAndMessage) {
  Status s = NotFoundError("no tensor 'w'");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_EQ(s.ToString(), "NOT_FOUND: no tensor 'w'");
  EXPECT_EQ(s.WithContext("model.safetensors").message(), "model.safetensors: no tensor 'w'");
}

TEST(StatusTest, MacrosPropagate) {
  int v = 0;
  EXPECT_TRUE(UsesAssign(3, &v).ok());
  EXPECT_EQ(v, 3);
  Status bad = UsesAssign(-1, &v);
  EXPECT_EQ(bad.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(v, 3);
  EXPECT_TRUE(UsesReturnIfError(1).ok());
  EXPECT_EQ(UsesReturnIfError(0).code(), StatusCode::kInvalidArgument);
}

TEST(StatusDeathTest, CheckAbortsWithMessage) {
  EXPECT_DEATH(TANDEM_CHECK(1 == 2) << "custom detail", "CHECK failed: 1 == 2 custom detail");
  StatusOr<int> err = InternalError("boom");
  EXPECT_DEATH((void)err.value(), "boom");
}

}  // namespace
}  // namespace tandem
