// Test helper: a chat request parsed from JSON, failing the test when it does not parse.
#pragma once

#include <gtest/gtest.h>

#include <string_view>

#include "prefixgate/canonicalize/request.h"

namespace prefixgate::canon::test_support {

inline ParsedRequest chat(std::string_view body) {
  auto r = parse_request(body, Endpoint::kChatCompletions);
  EXPECT_TRUE(r) << r.error().message;
  return r ? std::move(*r) : ParsedRequest{};
}

}  // namespace prefixgate::canon::test_support
