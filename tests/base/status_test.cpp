#include "prefixgate/base/status.h"

#include <gtest/gtest.h>

namespace prefixgate {
namespace {

TEST(StatusTest, ResultHoldsValueOrError) {
  Result<int> ok = 7;
  ASSERT_TRUE(ok);
  EXPECT_EQ(*ok, 7);
  Result<int> bad = make_error(ErrorCode::kNotFound, "no such template", "model");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().message, "no such template");
  EXPECT_EQ(bad.error().param, "model");
}

TEST(StatusTest, StatusIsOkOrAnError) {
  Status fine;
  EXPECT_TRUE(fine.ok());
  Status failed = make_error(ErrorCode::kInternal, "device lost");
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.error().code, ErrorCode::kInternal);
}

TEST(StatusTest, CodesMapToTheStatusOfWhoseFaultItIs) {
  const auto status = [](ErrorCode code) { return http_status(make_error(code, "")); };
  for (ErrorCode client :
       {ErrorCode::kInvalidJson, ErrorCode::kInvalidUtf8, ErrorCode::kTooDeep,
        ErrorCode::kDuplicateKey, ErrorCode::kWrongType, ErrorCode::kMissingField,
        ErrorCode::kInvalidValue, ErrorCode::kUnsupported}) {
    EXPECT_EQ(status(client), 400) << error_code_name(client);
    EXPECT_TRUE(is_client_error(client));
  }
  EXPECT_EQ(status(ErrorCode::kTooLarge), 413);
  EXPECT_EQ(status(ErrorCode::kNotFound), 404);
  EXPECT_EQ(status(ErrorCode::kResourceExhausted), 429);
  EXPECT_EQ(status(ErrorCode::kUnavailable), 503);
  EXPECT_EQ(status(ErrorCode::kInternal), 500);
  EXPECT_FALSE(is_client_error(ErrorCode::kInternal));
  EXPECT_FALSE(is_client_error(ErrorCode::kUnavailable));
  EXPECT_FALSE(is_client_error(ErrorCode::kResourceExhausted));
  EXPECT_STREQ(error_code_name(ErrorCode::kInternal), "internal_error");
  EXPECT_STREQ(error_code_name(ErrorCode::kUnavailable), "service_unavailable");
}

TEST(CheckDeathTest, CheckStopsWithWhereAndWhy) {
  const int pages = 3;
  EXPECT_DEATH(PG_CHECK(pages > 4, "the step's pages cover its tokens"),
               "status_test.cpp:[0-9]+: broken invariant: `pages > 4`: the step's pages cover");
  PG_CHECK(pages == 3, "holds");  // a check that holds does nothing
}

#ifndef NDEBUG
TEST(CheckDeathTest, DebugCheckStopsInDebugBuilds) {
  EXPECT_DEATH(PG_DCHECK(false, "debug only"), "broken invariant: `false`: debug only");
}
#else
TEST(CheckTest, DebugCheckDoesNotEvaluateItsConditionInReleaseBuilds) {
  int evaluated = 0;
  PG_DCHECK(++evaluated > 0, "never evaluated");
  EXPECT_EQ(evaluated, 0);
}
#endif

}  // namespace
}  // namespace prefixgate
