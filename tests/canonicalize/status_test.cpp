#include "prefixgate/canonicalize/status.h"

#include <gtest/gtest.h>

namespace prefixgate::canon {
namespace {

TEST(StatusTest, OpenAiErrorBodyNamesParamAndCode) {
  Error e = make_error(ErrorCode::kWrongType, "messages[0].content must be a string or an array",
                       "messages[0].content");
  EXPECT_EQ(
      openai_error_body(e),
      R"({"error":{"message":"messages[0].content must be a string or an array",)"
      R"("type":"invalid_request_error","param":"messages[0].content","code":"invalid_type"}})");
  EXPECT_EQ(http_status(e), 400);
}

TEST(StatusTest, TooLargeIs413AndEmptyParamIsNull) {
  Error e = make_error(ErrorCode::kTooLarge, "body \"big\"");
  EXPECT_EQ(http_status(e), 413);
  EXPECT_EQ(openai_error_body(e),
            R"({"error":{"message":"body \"big\"","type":"invalid_request_error","param":null,)"
            R"("code":"request_too_large"}})");
}

TEST(StatusTest, ResultHoldsValueOrError) {
  Result<int> ok = 7;
  ASSERT_TRUE(ok);
  EXPECT_EQ(*ok, 7);
  Result<int> bad = make_error(ErrorCode::kNotFound, "no such template");
  ASSERT_FALSE(bad);
  EXPECT_EQ(http_status(bad.error()), 404);
}

}  // namespace
}  // namespace prefixgate::canon
