// canon::parse_responses_request: validation, the Chat Completions equivalent of a Responses
// request (function calls and their outputs), the stateful fields refused, and the same block
// hashes for both shapes of one conversation.
#include <gtest/gtest.h>

#include "prefixgate/canonicalize/policy.h"
#include "prefixgate/canonicalize/prompt.h"
#include "prefixgate/canonicalize/responses_api.h"

namespace prefixgate::canon {
namespace {

constexpr std::string_view kResponses = R"({
  "model": "builtin:tiny", "instructions": "You are a coding agent.",
  "input": [
    {"role": "user", "content": "Where is the router?"},
    {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Let me look."}]},
    {"type": "function_call", "call_id": "call_1", "name": "grep", "arguments": "{\"pattern\":\"route\"}"},
    {"type": "function_call", "call_id": "call_2", "name": "read_file", "arguments": "{\"path\":\"a\"}"},
    {"type": "reasoning", "summary": []},
    {"type": "function_call_output", "call_id": "call_1", "output": "gateway/src/routing.cpp"},
    {"type": "function_call_output", "call_id": "call_2", "output": [{"type": "input_text", "text": "int main"}]},
    {"role": "user", "content": [{"type": "input_text", "text": "Open it."}]}],
  "tools": [
    {"type": "function", "name": "read_file", "description": "Reads a file", "strict": true,
     "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}},
    {"type": "function", "name": "grep", "parameters": {"type": "object", "properties": {"pattern": {"type": "string"}}}}],
  "tool_choice": {"type": "function", "name": "grep"},
  "max_output_tokens": 32, "temperature": 0.2, "stream": true, "store": false, "prompt_cache_key": "repo-9"
})";

constexpr std::string_view kChat = R"({
  "model": "builtin:tiny", "max_tokens": 32,
  "messages": [
    {"role": "system", "content": "You are a coding agent."},
    {"role": "user", "content": "Where is the router?"},
    {"role": "assistant", "content": "Let me look.", "tool_calls": [
      {"id": "call_1", "type": "function", "function": {"name": "grep", "arguments": "{\"pattern\":\"route\"}"}},
      {"id": "call_2", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\":\"a\"}"}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "gateway/src/routing.cpp"},
    {"role": "tool", "tool_call_id": "call_2", "content": "int main"},
    {"role": "user", "content": "Open it."}],
  "tools": [
    {"type": "function", "function": {"name": "read_file", "description": "Reads a file", "strict": true,
     "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}},
    {"type": "function", "function": {"name": "grep",
     "parameters": {"type": "object", "properties": {"pattern": {"type": "string"}}}}}]
})";

ResponsesRequest responses(std::string_view body) {
  auto r = parse_responses_request(body);
  EXPECT_TRUE(r) << r.error().param << ": " << r.error().message;
  return r ? std::move(*r) : ResponsesRequest{};
}

ParsedRequest canonical_chat(const json::Value& body) {
  auto r = parse_request_value(body, Endpoint::kChatCompletions);
  EXPECT_TRUE(r) << r.error().param << ": " << r.error().message;
  if (!r) return {};
  CanonicalizationPolicy rewrite = CanonicalizationPolicy::none();
  rewrite.tool_json = rewrite.tool_order = true;
  (void)canonicalize_in_place(*r, rewrite, CanonicalizationPolicy::none());
  return std::move(*r);
}

TEST(ResponsesRequestTest, ConvertsItemsIntoTheEquivalentChatRequest) {
  const ResponsesRequest r = responses(kResponses);
  EXPECT_EQ(r.model, "builtin:tiny");
  EXPECT_TRUE(r.stream);
  EXPECT_EQ(r.max_output_tokens, 32u);
  EXPECT_EQ(
      json::to_json(r.chat.body),
      R"({"model":"builtin:tiny","messages":[{"role":"system","content":"You are a coding agent."},)"
      R"({"role":"user","content":"Where is the router?"},)"
      R"({"role":"assistant","content":"Let me look.","tool_calls":[)"
      R"({"id":"call_1","type":"function","function":{"name":"grep","arguments":"{\"pattern\":\"route\"}"}},)"
      R"({"id":"call_2","type":"function","function":{"name":"read_file","arguments":"{\"path\":\"a\"}"}}]},)"
      R"({"role":"tool","tool_call_id":"call_1","content":"gateway/src/routing.cpp"},)"
      R"({"role":"tool","tool_call_id":"call_2","content":"int main"},)"
      R"({"role":"user","content":"Open it."}],)"
      R"("tools":[{"function":{"description":"Reads a file","name":"read_file","parameters":)"
      R"({"type":"object","properties":{"path":{"type":"string"}}},"strict":true},"type":"function"},)"
      R"({"function":{"name":"grep","parameters":{"type":"object","properties":{"pattern":{"type":"string"}}}},"type":"function"}],)"
      R"("tool_choice":{"type":"function","function":{"name":"grep"}},"max_tokens":32,"temperature":0.2,)"
      R"("stream":true,"stream_options":{"include_usage":true},"user":"repo-9"})");
}

TEST(ResponsesRequestTest, BothShapesOfOneConversationHashToTheSameBlocks) {
  const ResponsesRequest r = responses(kResponses);
  const ParsedRequest a_req = canonical_chat(r.chat.body);
  const ParsedRequest b_req = canonical_chat(*json::parse(kChat));
  auto tokenizer = make_byte_tokenizer();
  for (ChatTemplate t : {ChatTemplate::kLlama3, ChatTemplate::kChatml}) {
    const PromptModel model{t, tokenizer.get(), 16, "builtin:tiny"};
    auto a = analyze_prompt(a_req, model);
    auto b = analyze_prompt(b_req, model);
    ASSERT_TRUE(a && b);
    EXPECT_EQ(a->rendered.text, b->rendered.text);
    EXPECT_EQ(a->block_hashes, b->block_hashes);
  }
}

TEST(ResponsesRequestTest, AStringInputIsOneUserMessage) {
  const ResponsesRequest r = responses(R"({"input": "Hello", "user": "u1"})");
  EXPECT_EQ(json::to_json(r.chat.body),
            R"({"messages":[{"role":"user","content":"Hello"}],"user":"u1"})");
  EXPECT_EQ(source_field(r.chat, "messages[0].content"), "input");
}

TEST(ResponsesRequestTest, StatefulFieldsAreRefusedWithAClearMessage) {
  const auto refused = [](std::string_view body, std::string_view param) {
    auto r = parse_responses_request(body);
    ASSERT_FALSE(r) << body;
    EXPECT_EQ(r.error().code, ErrorCode::kUnsupported);
    EXPECT_EQ(r.error().param, param);
    EXPECT_NE(r.error().message.find("not"), std::string::npos);
  };
  refused(R"({"input":"x","previous_response_id":"resp_1"})", "previous_response_id");
  refused(R"({"input":"x","store":true})", "store");
  refused(R"({"input":"x","background":true})", "background");
  refused(R"({"input":"x","conversation":"conv_1"})", "conversation");
  refused(R"({"input":[{"type":"item_reference","id":"msg_1"}]})", "input[0].type");
  refused(R"({"input":"x","tools":[{"type":"web_search"}]})", "tools[0].type");
  refused(R"({"input":"x","text":{"format":{"type":"json_schema","schema":{}}}})", "text.format");
  // store: false and a null previous_response_id are what stateless clients send.
  EXPECT_TRUE(
      parse_responses_request(R"({"input":"x","store":false,"previous_response_id":null})"));
}

TEST(ResponsesRequestTest, InvalidItemsAreRefusedNamingTheField) {
  struct Case {
    std::string_view body;
    ErrorCode code;
    std::string_view param;
  };
  const Case cases[] = {
      {R"({"model":"m"})", ErrorCode::kMissingField, "input"},
      {R"({"input":[]})", ErrorCode::kInvalidValue, "input"},
      {R"({"input":[{"role":"tool","content":"x"}]})", ErrorCode::kInvalidValue, "input[0].role"},
      {R"({"input":[{"type":"function_call","name":"f","arguments":"{}"}]})",
       ErrorCode::kMissingField, "input[0].call_id"},
      {R"({"input":[{"type":"function_call_output","call_id":"c"}]})", ErrorCode::kMissingField,
       "input[0].output"},
      {R"({"input":[{"role":"user","content":[{"type":"input_file","file_id":"f"}]}]})",
       ErrorCode::kUnsupported, "input[0].content[0].type"},
      {R"({"input":"x","max_output_tokens":0})", ErrorCode::kInvalidValue, "max_output_tokens"},
      {R"({"input":"x","tool_choice":"sometimes"})", ErrorCode::kInvalidValue, "tool_choice"},
      {R"({"input":"x","instructions":["a"]})", ErrorCode::kWrongType, "instructions"},
      {R"({"input":"x","tools":[{"type":"function","name":"f"},{"type":"function","name":"f"}]})",
       ErrorCode::kInvalidValue, "tools[1].name"},
  };
  for (const Case& c : cases) {
    auto r = parse_responses_request(c.body);
    ASSERT_FALSE(r) << c.body;
    EXPECT_EQ(r.error().code, c.code) << c.body << ": " << r.error().message;
    EXPECT_EQ(r.error().param, c.param) << c.body << ": " << r.error().message;
  }
}

TEST(ResponsesRequestTest, WriteBackMakesTheClientBodyConvertToTheCanonicalChatBody) {
  ResponsesRequest r = responses(R"({"instructions": "Today 2026-08-20T14:33:07Z.",
      "input": [{"role": "developer", "content": "Build at 2026-08-20 14:33:07"}, {"role": "user", "content": "go"}],
      "tools": [{"type": "function", "name": "b", "parameters": {"type": "object", "properties": {}}},
                {"type": "function", "name": "a", "parameters": {"properties": {}, "type": "object"}}]})");
  auto chat = parse_request_value(r.chat.body, Endpoint::kChatCompletions);
  ASSERT_TRUE(chat);
  (void)canonicalize_in_place(*chat, CanonicalizationPolicy{}, CanonicalizationPolicy::none());
  write_back(r.chat, *chat, r.body);
  const ResponsesRequest again = responses(json::to_json(r.body));
  EXPECT_EQ(json::to_json(again.chat.body), json::to_json(chat->body));
  EXPECT_EQ(json::to_json(*r.body.find("instructions")), R"("Today 2026-08-20T14:00:00Z.")");
}

}  // namespace
}  // namespace prefixgate::canon
