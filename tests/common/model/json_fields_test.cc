#include "common/model/json_fields.h"

#include <gtest/gtest.h>

#include <cstdint>

namespace tandem::model {
namespace {

TEST(JsonFieldsTest, Int64ReadsTheWholeRangeAndNamesBadValues) {
  const nlohmann::json j = nlohmann::json::parse(
      R"({"big": 150000000000, "negative": -5, "max": 9223372036854775807, "over": 9223372036854775808,
          "real": 1.5, "text": "1"})");
  JsonFields f(j, "profile.json");
  int64_t v = 7;
  EXPECT_TRUE(f.Int64("absent", &v).ok());
  EXPECT_EQ(v, 7);
  ASSERT_TRUE(f.Int64("big", &v).ok());
  EXPECT_EQ(v, 150000000000);
  ASSERT_TRUE(f.Int64("negative", &v).ok());
  EXPECT_EQ(v, -5);
  ASSERT_TRUE(f.Int64("max", &v).ok());
  EXPECT_EQ(v, INT64_MAX);
  EXPECT_EQ(f.Int64("over", &v).message(), "profile.json: field 'over' must be an integer in 64-bit range");
  EXPECT_EQ(f.Int64("real", &v).message(), "profile.json: field 'real' must be an integer");
  EXPECT_FALSE(f.Int64("text", &v).ok());
  EXPECT_EQ(v, INT64_MAX);  // untouched by the refusals
}

}  // namespace
}  // namespace tandem::model
