// Chat Completions replies made into Anthropic Messages replies: the whole message (content
// blocks, stop reasons, usage), the stream writer's events, and error bodies.
#include "prefixgate/canonicalize/anthropic_reply.h"

#include <gtest/gtest.h>

#include "prefixgate/canonicalize/sse.h"

namespace prefixgate::canon {
namespace {

ChatReply chunk(std::string_view json) {
  auto doc = json::parse(json);
  EXPECT_TRUE(doc) << json;
  auto c = parse_chat_chunk(*doc);
  EXPECT_TRUE(c) << c.error().message;
  return c ? std::move(*c) : ChatReply{};
}

// The events of a written stream, each as its name and parsed data.
std::vector<std::pair<std::string, json::Value>> events_of(const std::string& stream) {
  SseReader reader;
  std::vector<SseEvent> events;
  reader.feed(stream, events);
  EXPECT_TRUE(reader.pending().empty()) << reader.pending();
  std::vector<std::pair<std::string, json::Value>> out;
  for (SseEvent& e : events) {
    auto data = json::parse(e.data);
    EXPECT_TRUE(data) << e.data;
    EXPECT_EQ(data->find("type")->as_string(), e.event);  // Anthropic names each event twice
    out.emplace_back(e.event, std::move(*data));
  }
  return out;
}

std::vector<std::string> names(const std::vector<std::pair<std::string, json::Value>>& events) {
  std::vector<std::string> out;
  for (const auto& [name, data] : events) out.push_back(name);
  return out;
}

TEST(AnthropicReplyTest, ATextReplyBecomesAMessageWithItsUsage) {
  auto body = json::parse(R"({"id":"chatcmpl-1","object":"chat.completion","model":"builtin:tiny",
      "choices":[{"index":0,"message":{"role":"assistant","content":"Hello"},"finish_reason":"stop"}],
      "usage":{"prompt_tokens":100,"completion_tokens":5,"prompt_tokens_details":{"cached_tokens":64}}})");
  auto reply = parse_chat_reply(*body);
  ASSERT_TRUE(reply);
  const MessagesReplyContext ctx{.id = "msg_1", .model = "claude-x", .breakpoint_tokens = 80};
  EXPECT_EQ(
      messages_body(*reply, ctx),
      R"({"id":"msg_1","type":"message","role":"assistant","model":"claude-x",)"
      R"("content":[{"type":"text","text":"Hello"}],"stop_reason":"end_turn","stop_sequence":null,)"
      R"("usage":{"input_tokens":20,"cache_creation_input_tokens":16,)"
      R"("cache_read_input_tokens":64,"output_tokens":5}})");
}

TEST(AnthropicReplyTest, UsageAddsUpToThePrompt) {
  // No breakpoint: nothing is declared, so nothing counts as created.
  MessagesUsage u = messages_usage(ChatUsage{100, 5, 64}, 0);
  EXPECT_EQ(u.input_tokens + u.cache_read_input_tokens + u.cache_creation_input_tokens, 100u);
  EXPECT_EQ(u.cache_creation_input_tokens, 0u);
  // A breakpoint inside the cached part: created nothing.
  u = messages_usage(ChatUsage{100, 5, 64}, 50);
  EXPECT_EQ(u.cache_creation_input_tokens, 0u);
  EXPECT_EQ(u.input_tokens, 36u);
  // A cold prompt with a breakpoint: the declared prefix is created, the rest is input.
  u = messages_usage(ChatUsage{100, 5, 0}, 90);
  EXPECT_EQ(u.cache_creation_input_tokens, 90u);
  EXPECT_EQ(u.input_tokens, 10u);
  // A breakpoint past the prompt (another tokenizer's count) is bounded by it.
  u = messages_usage(ChatUsage{100, 5, 0}, 500);
  EXPECT_EQ(u.cache_creation_input_tokens, 100u);
  EXPECT_EQ(u.input_tokens, 0u);
}

TEST(AnthropicReplyTest, StopReasonsMapFromFinishReasons) {
  const std::vector<std::string> stops{"END"};
  const auto stop = [&](std::string finish, std::string stop_string, bool calls) {
    ChatReply r;
    r.finish_reason = std::move(finish);
    r.stop_string = std::move(stop_string);
    if (calls) r.tool_calls.push_back(ChatToolCall{});
    return messages_stop(r, stops);
  };
  EXPECT_EQ(stop("stop", "", false).reason, "end_turn");
  EXPECT_EQ(stop("stop", "END", false).reason, "stop_sequence");
  EXPECT_EQ(stop("stop", "END", false).sequence, "END");
  EXPECT_EQ(stop("stop", "other", false).reason, "end_turn");  // not one of the request's
  EXPECT_EQ(stop("length", "", false).reason, "max_tokens");
  EXPECT_EQ(stop("tool_calls", "", true).reason, "tool_use");
  EXPECT_EQ(stop("stop", "", true).reason, "tool_use");
  EXPECT_EQ(stop("content_filter", "", false).reason, "refusal");
}

TEST(AnthropicReplyTest, ToolCallsBecomeToolUseBlocksWithParsedInput) {
  auto body = json::parse(R"({"id":"c","model":"m","choices":[{"message":{"role":"assistant",
      "content":null,"tool_calls":[
        {"id":"call_1","type":"function","function":{"name":"grep","arguments":"{\"pattern\": \"x\"}"}},
        {"type":"function","function":{"name":"ls","arguments":"not json"}}]},
      "finish_reason":"tool_calls"}]})");
  auto reply = parse_chat_reply(*body);
  ASSERT_TRUE(reply);
  const std::string out = messages_body(*reply, MessagesReplyContext{.id = "msg_7"});
  EXPECT_NE(
      out.find(
          R"("content":[{"type":"tool_use","id":"call_1","name":"grep","input":{"pattern":"x"}},)"
          R"({"type":"tool_use","id":"toolu_7_1","name":"ls","input":{}}])"),
      std::string::npos)
      << out;
  EXPECT_NE(out.find(R"("stop_reason":"tool_use")"), std::string::npos);
  EXPECT_NE(out.find(R"("model":"m")"), std::string::npos);  // the reply's, none asked
}

TEST(AnthropicReplyTest, AStreamOfTextIsMessageStartBlocksDeltaAndStop) {
  MessagesStreamWriter w(
      MessagesReplyContext{.id = "msg_1", .model = "m", .breakpoint_tokens = 10});
  std::string out;
  w.add(
      chunk(
          R"({"id":"c","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]})"),
      out);
  w.add(
      chunk(R"({"id":"c","choices":[{"index":0,"delta":{"content":"Hel"},"finish_reason":null}]})"),
      out);
  w.add(
      chunk(R"({"id":"c","choices":[{"index":0,"delta":{"content":"lo"},"finish_reason":null}]})"),
      out);
  w.add(
      chunk(
          R"({"id":"c","choices":[{"index":0,"delta":{},"finish_reason":"stop","stop_reason":"\n\n"}]})"),
      out);
  w.add(
      chunk(
          R"({"id":"c","choices":[],"usage":{"prompt_tokens":30,"completion_tokens":2,"prompt_tokens_details":{"cached_tokens":16}}})"),
      out);
  w.finish(out);
  const auto events = events_of(out);
  EXPECT_EQ(names(events),
            (std::vector<std::string>{"message_start", "ping", "content_block_start",
                                      "content_block_delta", "content_block_delta",
                                      "content_block_stop", "message_delta", "message_stop"}));
  EXPECT_EQ(
      json::to_json(events[0].second),
      R"({"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant",)"
      R"("model":"m","content":[],"stop_reason":null,"stop_sequence":null,"usage":)"
      R"({"input_tokens":0,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":0}}})");
  EXPECT_EQ(
      json::to_json(events[2].second),
      R"({"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}})");
  EXPECT_EQ(
      json::to_json(events[4].second),
      R"({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"lo"}})");
  EXPECT_EQ(
      json::to_json(events[6].second),
      R"({"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},)"
      R"("usage":{"input_tokens":14,"cache_creation_input_tokens":0,"cache_read_input_tokens":16,"output_tokens":2}})");
  EXPECT_TRUE(w.finished());
  ASSERT_TRUE(w.usage());
  EXPECT_EQ(w.usage()->cached_tokens, 16u);
}

TEST(AnthropicReplyTest, AStreamedToolCallIsAToolUseBlockOfJsonDeltas) {
  MessagesStreamWriter w(MessagesReplyContext{.id = "msg_1", .model = "m"});
  std::string out;
  w.add(chunk(R"({"choices":[{"delta":{"content":"Looking."}}]})"), out);
  w.add(
      chunk(
          R"({"choices":[{"delta":{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"grep","arguments":""}}]}}]})"),
      out);
  w.add(
      chunk(
          R"({"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"p\":"}}]}}]})"),
      out);
  w.add(
      chunk(
          R"({"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"1}"}}]}}]})"),
      out);
  w.add(
      chunk(
          R"({"choices":[{"delta":{"tool_calls":[{"index":1,"id":"call_b","function":{"name":"ls","arguments":"{}"}}]}}]})"),
      out);
  w.add(chunk(R"({"choices":[{"delta":{},"finish_reason":"tool_calls"}]})"), out);
  w.finish(out);
  const auto events = events_of(out);
  EXPECT_EQ(names(events),
            (std::vector<std::string>{
                "message_start", "ping", "content_block_start", "content_block_delta",
                "content_block_stop", "content_block_start", "content_block_delta",
                "content_block_delta", "content_block_stop", "content_block_start",
                "content_block_delta", "content_block_stop", "message_delta", "message_stop"}));
  EXPECT_EQ(json::to_json(events[5].second),
            R"({"type":"content_block_start","index":1,"content_block":)"
            R"({"type":"tool_use","id":"call_a","name":"grep","input":{}}})");
  EXPECT_EQ(
      json::to_json(events[7].second),
      R"({"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"1}"}})");
  EXPECT_EQ(json::to_json(*events[9].second.find("index")), "2");
  EXPECT_EQ(json::to_json(*events[12].second.find("delta")),
            R"({"stop_reason":"tool_use","stop_sequence":null})");
}

TEST(AnthropicReplyTest, AFailedStreamEndsWithAnErrorEvent) {
  MessagesStreamWriter w(MessagesReplyContext{.id = "msg_1"});
  std::string out;
  w.add(chunk(R"({"choices":[{"delta":{"content":"par"}}]})"), out);
  w.fail(502, "the upstream replica failed mid-stream", out);
  w.finish(out);  // nothing after the error
  const auto events = events_of(out);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back().first, "error");
  EXPECT_EQ(
      json::to_json(events.back().second),
      R"({"type":"error","error":{"type":"api_error","message":"the upstream replica failed mid-stream"}})");
}

TEST(AnthropicReplyTest, ErrorBodiesHaveAnthropicsTypes) {
  EXPECT_EQ(messages_error_body(400, "bad"),
            R"({"type":"error","error":{"type":"invalid_request_error","message":"bad"}})");
  const std::pair<int, const char*> types[] = {{400, "invalid_request_error"},
                                               {401, "authentication_error"},
                                               {403, "permission_error"},
                                               {404, "not_found_error"},
                                               {405, "invalid_request_error"},
                                               {413, "request_too_large"},
                                               {429, "rate_limit_error"},
                                               {500, "api_error"},
                                               {502, "api_error"},
                                               {503, "overloaded_error"},
                                               {529, "overloaded_error"}};
  for (const auto& [status, type] : types)
    EXPECT_STREQ(messages_error_type(status), type) << status;
  EXPECT_EQ(error_message_of(R"({"error":{"message":"no such model","type":"x"}})"),
            "no such model");
  EXPECT_EQ(error_message_of("plain text"), "plain text");
}

}  // namespace
}  // namespace prefixgate::canon
