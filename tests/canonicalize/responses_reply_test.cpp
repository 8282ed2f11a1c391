// Chat Completions replies made into OpenAI Responses replies: the response object (output
// items, status, usage with cached tokens) and the stream writer's semantic events.
#include "prefixgate/canonicalize/responses_reply.h"

#include <gtest/gtest.h>

#include "prefixgate/canonicalize/sse.h"

namespace prefixgate::canon {
namespace {

ChatReply chunk(std::string_view text) {
  auto c = parse_chat_chunk(*json::parse(text));
  EXPECT_TRUE(c);
  return c ? std::move(*c) : ChatReply{};
}

std::vector<json::Value> events_of(const std::string& stream, std::vector<std::string>& names) {
  SseReader reader;
  std::vector<SseEvent> events;
  reader.feed(stream, events);
  EXPECT_TRUE(reader.pending().empty());
  std::vector<json::Value> out;
  for (std::size_t i = 0; i < events.size(); ++i) {
    auto data = json::parse(events[i].data);
    EXPECT_TRUE(data) << events[i].data;
    EXPECT_EQ(data->find("type")->as_string(), events[i].event);
    // Every event is numbered, from 0, in order.
    EXPECT_EQ(data->find("sequence_number")->as_number().value, static_cast<double>(i));
    names.push_back(events[i].event);
    out.push_back(std::move(*data));
  }
  return out;
}

const ResponsesReplyContext kContext{
    .id = "resp_9", .model = "builtin:tiny", .created_at = 1700000000, .echo = {}};

TEST(ResponsesReplyTest, AReplyBecomesAResponseWithCachedTokens) {
  auto reply = parse_chat_reply(*json::parse(R"({"id":"c","model":"m","choices":[{"message":
      {"role":"assistant","content":"Hi","tool_calls":[{"id":"call_1","type":"function",
      "function":{"name":"grep","arguments":"{\"p\":1}"}}]},"finish_reason":"tool_calls"}],
      "usage":{"prompt_tokens":50,"completion_tokens":4,"prompt_tokens_details":{"cached_tokens":32}}})"));
  ASSERT_TRUE(reply);
  EXPECT_EQ(
      responses_body(*reply, kContext),
      R"({"id":"resp_9","object":"response","created_at":1700000000,"status":"completed","error":null,)"
      R"("incomplete_details":null,"model":"builtin:tiny","output":[)"
      R"({"id":"msg_9","type":"message","status":"completed","role":"assistant","content":)"
      R"([{"type":"output_text","text":"Hi","annotations":[],"logprobs":[]}]},)"
      R"({"id":"fc_9_0","type":"function_call","status":"completed","call_id":"call_1","name":"grep",)"
      R"("arguments":"{\"p\":1}"}],"usage":{"input_tokens":50,"input_tokens_details":{"cached_tokens":32},)"
      R"("output_tokens":4,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":54}})");
}

TEST(ResponsesReplyTest, ALengthStopIsIncompleteForMaxOutputTokens) {
  ChatReply r;
  r.text = "partial";
  r.finish_reason = "length";
  const std::string body = responses_body(r, kContext);
  EXPECT_NE(body.find(R"("status":"incomplete")"), std::string::npos);
  EXPECT_NE(body.find(R"("incomplete_details":{"reason":"max_output_tokens"})"), std::string::npos);
}

TEST(ResponsesReplyTest, TheEchoRepeatsTheRequestsFields) {
  const json::Object echo = responses_echo(*json::parse(
      R"({"instructions":"be brief","tools":[{"type":"function","name":"f"}],"temperature":0})"));
  const std::string text = json::to_json(json::Value(echo));
  EXPECT_NE(text.find(R"("instructions":"be brief")"), std::string::npos);
  EXPECT_NE(text.find(R"("tools":[{"type":"function","name":"f"}])"), std::string::npos);
  EXPECT_NE(text.find(R"("tool_choice":"auto")"), std::string::npos);
  EXPECT_NE(text.find(R"("store":false)"), std::string::npos);
  EXPECT_NE(text.find(R"("previous_response_id":null)"), std::string::npos);
}

// Every response object, the body's and each stream event's, has its members in one order, the
// request's echoed fields between the output and the usage.
TEST(ResponsesReplyTest, EveryResponseObjectCarriesTheEchoBetweenOutputAndUsage) {
  ResponsesReplyContext context = kContext;
  context.echo = responses_echo(*json::parse(R"({"instructions":"be \"brief\"","top_p":0.5})"));
  const std::string echo = json::to_json(json::Value(context.echo));
  const std::string members = echo.substr(1, echo.size() - 2);  // "instructions":...,...
  const auto check = [&](const json::Value& response, const std::string& where) {
    const std::string text = json::to_json(response);
    std::vector<std::string> keys;
    for (const json::Member& m : response.as_object()) keys.push_back(m.key);
    ASSERT_GE(keys.size(), 10u) << where;
    EXPECT_EQ(std::vector<std::string>(keys.begin(), keys.begin() + 8),
              (std::vector<std::string>{"id", "object", "created_at", "status", "error",
                                        "incomplete_details", "model", "output"}))
        << where;
    EXPECT_EQ(keys.back(), "usage") << where;
    EXPECT_NE(text.find("]," + members + ",\"usage\":"), std::string::npos) << where << text;
  };
  ChatReply reply;
  reply.text = "Hi";
  reply.finish_reason = "length";
  check(*json::parse(responses_body(reply, context)), "body");
  ResponsesStreamWriter w(context);
  std::string out;
  w.add(chunk(R"({"choices":[{"delta":{"content":"Hi"},"finish_reason":"length"}]})"), out);
  w.finish(out);
  std::vector<std::string> names;
  const auto events = events_of(out, names);
  std::size_t responses = 0;
  for (std::size_t i = 0; i < events.size(); ++i) {
    if (const json::Value* response = events[i].find("response")) {
      check(*response, names[i]);
      ++responses;
    }
  }
  EXPECT_EQ(responses, 3u);  // created, in_progress, incomplete
  EXPECT_EQ(names.back(), "response.incomplete");
}

TEST(ResponsesReplyTest, AStreamOfTextHasTheSemanticEventsInOrder) {
  ResponsesStreamWriter w(kContext);
  std::string out;
  w.add(chunk(R"({"choices":[{"delta":{"role":"assistant","content":""}}]})"), out);
  w.add(chunk(R"({"choices":[{"delta":{"content":"Hel"}}]})"), out);
  w.add(chunk(R"({"choices":[{"delta":{"content":"lo"}}]})"), out);
  w.add(chunk(R"({"choices":[{"delta":{},"finish_reason":"stop"}]})"), out);
  w.add(
      chunk(
          R"({"choices":[],"usage":{"prompt_tokens":9,"completion_tokens":2,"prompt_tokens_details":{"cached_tokens":0}}})"),
      out);
  w.finish(out);
  std::vector<std::string> names;
  const auto events = events_of(out, names);
  EXPECT_EQ(names,
            (std::vector<std::string>{"response.created", "response.in_progress",
                                      "response.output_item.added", "response.content_part.added",
                                      "response.output_text.delta", "response.output_text.delta",
                                      "response.output_text.done", "response.content_part.done",
                                      "response.output_item.done", "response.completed"}));
  EXPECT_EQ(json::to_json(*events[0].find("response")->find("status")), R"("in_progress")");
  EXPECT_EQ(json::to_json(events[4]),
            R"({"type":"response.output_text.delta","item_id":"msg_9","output_index":0,)"
            R"("content_index":0,"delta":"Hel","logprobs":[],"sequence_number":4})");
  EXPECT_EQ(json::to_json(*events[6].find("text")), R"("Hello")");
  const json::Value& done = *events.back().find("response");
  EXPECT_EQ(json::to_json(*done.find("status")), R"("completed")");
  EXPECT_EQ(json::to_json(*done.find("output")),
            R"([{"id":"msg_9","type":"message","status":"completed","role":"assistant","content":)"
            R"([{"type":"output_text","text":"Hello","annotations":[],"logprobs":[]}]}])");
  EXPECT_EQ(json::to_json(*done.find("usage")->find("input_tokens")), "9");
}

TEST(ResponsesReplyTest, AStreamedFunctionCallHasArgumentDeltasAndItsDoneEvents) {
  ResponsesStreamWriter w(kContext);
  std::string out;
  w.add(
      chunk(
          R"({"choices":[{"delta":{"tool_calls":[{"index":0,"id":"call_a","function":{"name":"grep","arguments":"{\"p\""}}]}}]})"),
      out);
  w.add(
      chunk(
          R"({"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":":1}"}}]}}]})"),
      out);
  w.add(chunk(R"({"choices":[{"delta":{},"finish_reason":"tool_calls"}]})"), out);
  w.finish(out);
  std::vector<std::string> names;
  const auto events = events_of(out, names);
  EXPECT_EQ(names,
            (std::vector<std::string>{
                "response.created", "response.in_progress", "response.output_item.added",
                "response.function_call_arguments.delta", "response.function_call_arguments.delta",
                "response.function_call_arguments.done", "response.output_item.done",
                "response.completed"}));
  EXPECT_EQ(json::to_json(*events[2].find("item")),
            R"({"id":"fc_9_0","type":"function_call","status":"in_progress","call_id":"call_a",)"
            R"("name":"grep","arguments":""})");
  EXPECT_EQ(json::to_json(*events[5].find("arguments")), R"("{\"p\":1}")");
  EXPECT_EQ(json::to_json(*events[6].find("item")->find("status")), R"("completed")");
}

TEST(ResponsesReplyTest, AFailedStreamEndsWithAnErrorEvent) {
  ResponsesStreamWriter w(kContext);
  std::string out;
  w.add(chunk(R"({"choices":[{"delta":{"content":"x"}}]})"), out);
  w.fail("upstream_stream_error", "the upstream replica failed mid-stream", out);
  std::vector<std::string> names;
  const auto events = events_of(out, names);
  EXPECT_EQ(names.back(), "error");
  EXPECT_EQ(json::to_json(*events.back().find("code")), R"("upstream_stream_error")");
}

}  // namespace
}  // namespace prefixgate::canon
