#include "prefixgate/canonicalize/request.h"

#include <gtest/gtest.h>

#include <string>

namespace prefixgate::canon {
namespace {

Result<ParsedRequest> parse_chat(std::string_view body) {
  return parse_request(body, Endpoint::kChatCompletions);
}

// Asserts `body` fails with `code` naming `param`.
void expect_error(std::string_view body, ErrorCode code, std::string_view param,
                  Endpoint endpoint = Endpoint::kChatCompletions) {
  auto r = parse_request(body, endpoint);
  ASSERT_FALSE(r) << body;
  EXPECT_EQ(r.error().code, code) << r.error().message;
  EXPECT_EQ(r.error().param, param) << r.error().message;
  EXPECT_FALSE(r.error().message.empty());
}

TEST(RequestTest, ParsesChatMessagesToolsAndKeepsUnknownFields) {
  auto r = parse_chat(R"({"model":"m","messages":[
      {"role":"system","content":"You are terse."},
      {"role":"user","content":[{"type":"text","text":"Hi "},{"type":"image_url","image_url":{"url":"x"}},{"type":"text","text":"there"}]},
      {"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"f","arguments":"{}"}}]},
      {"role":"tool","tool_call_id":"call_1","content":"42"}],
    "tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}],
    "stream":true,"cache_salt":"tenant-7","x_vendor":{"keep":[1.50,2]}})");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->model, "m");
  EXPECT_TRUE(r->stream);
  EXPECT_EQ(r->cache_salt, "tenant-7");
  ASSERT_EQ(r->messages.size(), 4u);
  EXPECT_EQ(r->messages[0].role, Role::kSystem);
  EXPECT_TRUE(r->messages[0].content_is_string);
  EXPECT_EQ(r->messages[1].text(), "Hi there");
  EXPECT_EQ(r->messages[1].parts.size(), 3u);
  EXPECT_TRUE(r->messages[2].tool_calls.is_array());
  EXPECT_EQ(r->messages[3].tool_call_id, "call_1");
  ASSERT_EQ(r->tools.size(), 1u);
  EXPECT_EQ(r->tools[0].name, "f");
  EXPECT_EQ(r->tools[0].path, "tools[0]");
  // Unknown fields survive byte for byte (numbers keep their spelling).
  EXPECT_EQ(json::to_json(*r->body.find("x_vendor")), R"({"keep":[1.50,2]})");
}

TEST(RequestTest, LegacyFunctionsAreTools) {
  auto r = parse_chat(R"({"messages":[{"role":"user","content":"x"}],"functions":[{"name":"g"}]})");
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_EQ(r->tools.size(), 1u);
  EXPECT_EQ(r->tools[0].path, "functions[0]");
}

TEST(RequestTest, CompletionPromptForms) {
  auto text = parse_request(R"({"prompt":"Once upon"})", Endpoint::kCompletions);
  ASSERT_TRUE(text);
  EXPECT_EQ(text->prompts.at(0).text, "Once upon");
  auto ids = parse_request(R"({"prompt":[1,2,3]})", Endpoint::kCompletions);
  ASSERT_TRUE(ids);
  EXPECT_TRUE(ids->prompts.at(0).is_tokens);
  EXPECT_EQ(ids->prompts.at(0).token_ids, (std::vector<TokenId>{1, 2, 3}));
  auto batch = parse_request(R"({"prompt":["a",[4,5]]})", Endpoint::kCompletions);
  ASSERT_TRUE(batch);
  EXPECT_EQ(batch->prompts.size(), 2u);
}

TEST(RequestTest, MalformedBodiesGetTypedErrorsNamingTheField) {
  expect_error("{", ErrorCode::kInvalidJson, "");
  expect_error("[]", ErrorCode::kWrongType, "(body)");
  expect_error(R"({"model":"m"})", ErrorCode::kMissingField, "messages");
  expect_error(R"({"messages":{}})", ErrorCode::kWrongType, "messages");
  expect_error(R"({"messages":[]})", ErrorCode::kInvalidValue, "messages");
  expect_error(R"({"messages":[{"content":"x"}]})", ErrorCode::kMissingField, "messages[0].role");
  expect_error(R"({"messages":[{"role":"wizard","content":"x"}]})", ErrorCode::kInvalidValue,
               "messages[0].role");
  expect_error(R"({"messages":[{"role":"user"}]})", ErrorCode::kMissingField,
               "messages[0].content");
  expect_error(R"({"messages":[{"role":"user","content":5}]})", ErrorCode::kWrongType,
               "messages[0].content");
  expect_error(R"({"messages":[{"role":"user","content":[{"type":"text"}]}]})",
               ErrorCode::kMissingField, "messages[0].content[0].text");
  expect_error(R"({"messages":[{"role":"tool","content":"x"}]})", ErrorCode::kMissingField,
               "messages[0].tool_call_id");
  expect_error(R"({"messages":[{"role":"user","content":"x"}],"temperature":"hot"})",
               ErrorCode::kWrongType, "temperature");
  expect_error(R"({"messages":[{"role":"user","content":"x"}],"max_tokens":1.5})",
               ErrorCode::kWrongType, "max_tokens");
  expect_error(R"({"messages":[{"role":"user","content":"x"}],"stop":["a",1]})",
               ErrorCode::kWrongType, "stop[1]");
  expect_error(R"({"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function"}]})",
               ErrorCode::kMissingField, "tools[0].function");
  expect_error(
      R"({"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":3}}]})",
      ErrorCode::kWrongType, "tools[0].function.name");
  expect_error(R"({"prompt":[1,-2]})", ErrorCode::kInvalidValue, "prompt[1]",
               Endpoint::kCompletions);
  expect_error(R"({"prompt":{}})", ErrorCode::kWrongType, "prompt", Endpoint::kCompletions);
  expect_error(R"({"model":"m"})", ErrorCode::kMissingField, "prompt", Endpoint::kCompletions);
}

TEST(RequestTest, LimitsAreEnforced) {
  RequestLimits limits;
  limits.max_body_bytes = 32;
  auto big = parse_request(R"({"messages":[{"role":"user","content":"0123456789"}]})",
                           Endpoint::kChatCompletions, limits);
  ASSERT_FALSE(big);
  EXPECT_EQ(big.error().code, ErrorCode::kTooLarge);
  EXPECT_EQ(http_status(big.error()), 413);

  std::string deep = R"({"messages":[{"role":"user","content":"x"}],"x":)";
  deep += std::string(200, '[') + std::string(200, ']') + "}";
  auto nested = parse_chat(deep);
  ASSERT_FALSE(nested);
  EXPECT_EQ(nested.error().code, ErrorCode::kTooDeep);

  auto bad_utf8 = parse_chat("{\"messages\":[{\"role\":\"user\",\"content\":\"\xff\"}]}");
  ASSERT_FALSE(bad_utf8);
  EXPECT_EQ(bad_utf8.error().code, ErrorCode::kInvalidUtf8);
}

TEST(RequestTest, GuessEndpoint) {
  EXPECT_EQ(guess_endpoint(*json::parse(R"({"messages":[]})")), Endpoint::kChatCompletions);
  EXPECT_EQ(guess_endpoint(*json::parse(R"({"prompt":"x"})")), Endpoint::kCompletions);
  EXPECT_FALSE(guess_endpoint(*json::parse(R"({"input":"x"})")));
}

}  // namespace
}  // namespace prefixgate::canon
