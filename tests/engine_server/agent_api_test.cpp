// The engine's /v1/messages and /v1/responses over real sockets: Anthropic- and Responses-shaped
// replies and streams, the engine's own cached tokens in their usage, cache shared with the
// chat equivalent, stop sequences, and errors in each API's shape.
#include <gtest/gtest.h>

#include "prefixgate/canonicalize/sse.h"
#include "test_client.h"
#include "test_server.h"

namespace prefixgate::engine::server::testing {
namespace {

// A system prompt long enough for several 16-token pages, marked as a cache breakpoint.
std::string system_text() {
  std::string s;
  for (int i = 0; i < 8; ++i) s += "You are a careful coding agent working in a large repository. ";
  return s;
}

std::string messages_body(const std::string& extra = "", const std::string& question = "Hi") {
  return R"({"model":"test-model","max_tokens":4,"system":[{"type":"text","text":")" +
         system_text() +
         R"(","cache_control":{"type":"ephemeral"}}],"messages":[{"role":"user","content":")" +
         question + R"("}])" + extra + "}";
}

struct Event {
  std::string name;
  json::Value data;
};

std::vector<Event> events_of(const std::string& body) {
  canon::SseReader reader;
  std::vector<canon::SseEvent> raw;
  reader.feed(body, raw);
  EXPECT_TRUE(reader.pending().empty()) << reader.pending();
  std::vector<Event> out;
  for (canon::SseEvent& e : raw) {
    auto data = json::parse(e.data);
    EXPECT_TRUE(data) << e.data;
    out.push_back(Event{e.event, data ? std::move(*data) : json::Value()});
  }
  return out;
}

double total_input(const json::Value& usage) {
  return num(usage, "input_tokens") + num(usage, "cache_read_input_tokens") +
         num(usage, "cache_creation_input_tokens");
}

TEST(AgentApiTest, MessagesReplyIsAnAnthropicMessageWithTheEnginesCacheUsage) {
  TestServer s;
  const HttpReply first = post(s.port(), "/v1/messages", messages_body());
  ASSERT_EQ(first.status, 200) << first.body;
  const json::Value a = parse_body(first);
  EXPECT_EQ(str(a, "type"), "message");
  EXPECT_EQ(str(a, "role"), "assistant");
  EXPECT_EQ(str(a, "id").rfind("msg_", 0), 0u);
  EXPECT_EQ(str(a, "model"), "test-model");
  EXPECT_EQ(str(a, "stop_reason"), "max_tokens");
  EXPECT_TRUE(at(a, "stop_sequence").is_null());
  const json::Value& content = at(a, "content");
  ASSERT_TRUE(content.is_array());
  ASSERT_EQ(content.as_array().size(), 1u);
  EXPECT_EQ(str(content.as_array()[0], "type"), "text");
  // Cold: the declared prefix (system prompt up to its breakpoint) is created, nothing read.
  const json::Value& cold = at(a, "usage");
  EXPECT_EQ(num(cold, "cache_read_input_tokens"), 0);
  EXPECT_GT(num(cold, "cache_creation_input_tokens"), static_cast<double>(system_text().size()));
  EXPECT_EQ(num(cold, "output_tokens"), 4);

  // Warm: the same prefix is read from the engine's cache, whole pages of it.
  const json::Value warm = at(parse_body(post(s.port(), "/v1/messages", messages_body())), "usage");
  const double read = num(warm, "cache_read_input_tokens");
  EXPECT_GE(read, num(cold, "cache_creation_input_tokens") - 16);
  EXPECT_EQ(static_cast<std::size_t>(read) % 16, 0u);
  EXPECT_EQ(num(warm, "cache_creation_input_tokens"), 0);
  EXPECT_EQ(total_input(warm), total_input(cold));  // the three add up to the prompt
}

TEST(AgentApiTest, MessagesAndTheChatEquivalentShareTheCache) {
  TestServer s;
  const std::string chat =
      R"({"model":"test-model","max_tokens":2,"messages":[{"role":"system","content":")" +
      system_text() + R"("},{"role":"user","content":"Hi"}]})";
  const HttpReply warmup = post(s.port(), "/v1/chat/completions", chat);
  ASSERT_EQ(warmup.status, 200) << warmup.body;
  const double prompt = num(at(parse_body(warmup), "usage"), "prompt_tokens");
  const json::Value usage =
      at(parse_body(post(s.port(), "/v1/messages", messages_body())), "usage");
  EXPECT_EQ(total_input(usage), prompt);  // the same tokens
  // The chat request's pages are served to the Messages request (all but a last partial one).
  EXPECT_GE(num(usage, "cache_read_input_tokens"),
            static_cast<double>(static_cast<std::size_t>(prompt) / 16 * 16) - 16);
}

TEST(AgentApiTest, MessagesStreamHasAnthropicsEventsAndFinalUsage) {
  TestServer s;
  const HttpReply r = post(s.port(), "/v1/messages", messages_body(R"(,"stream":true)"));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.content_type, "text/event-stream");
  const std::vector<Event> events = events_of(r.body);
  ASSERT_GE(events.size(), 7u);
  EXPECT_EQ(events[0].name, "message_start");
  EXPECT_EQ(events[1].name, "ping");
  EXPECT_EQ(events[2].name, "content_block_start");
  EXPECT_EQ(events[events.size() - 3].name, "content_block_stop");
  EXPECT_EQ(events[events.size() - 2].name, "message_delta");
  EXPECT_EQ(events.back().name, "message_stop");
  // message_start already has the engine's prompt counts; message_delta the whole usage.
  const json::Value& start_usage = at(at(events[0].data, "message"), "usage");
  EXPECT_GT(total_input(start_usage), 0);
  const json::Value& delta = events[events.size() - 2].data;
  EXPECT_EQ(str(at(delta, "delta"), "stop_reason"), "max_tokens");
  EXPECT_EQ(total_input(at(delta, "usage")), total_input(start_usage));
  EXPECT_EQ(num(at(delta, "usage"), "output_tokens"), 4);
  std::string text;
  for (const Event& e : events) {
    if (e.name == "content_block_delta") text += str(at(e.data, "delta"), "text");
  }
  const json::Value whole = parse_body(post(s.port(), "/v1/messages", messages_body()));
  EXPECT_EQ(text, str(at(whole, "content").as_array()[0], "text"));
}

TEST(AgentApiTest, AStopSequenceIsReportedAsTheOneThatMatched) {
  TestServer s;
  // The fake device's reply is deterministic: stop on a letter it produces.
  const json::Value full =
      parse_body(post(s.port(), "/v1/messages",
                      R"({"max_tokens":200,"messages":[{"role":"user","content":"stop test"}]})"));
  const std::string text = str(at(full, "content").as_array()[0], "text");
  std::size_t at_index = text.find_first_of("abcdefghijklmnopqrstuvwxyz");
  ASSERT_NE(at_index, std::string::npos) << "no letter in the output to stop on";
  const std::string stop(1, text[at_index]);
  const json::Value stopped = parse_body(post(
      s.port(), "/v1/messages",
      R"({"max_tokens":200,"messages":[{"role":"user","content":"stop test"}],"stop_sequences":["zzzz",")" +
          stop + R"("]})"));
  EXPECT_EQ(str(stopped, "stop_reason"), "stop_sequence");
  EXPECT_EQ(str(stopped, "stop_sequence"), stop);
  EXPECT_EQ(str(at(stopped, "content").as_array()[0], "text"), text.substr(0, at_index));
}

TEST(AgentApiTest, ResponsesReplyAndStreamCarryCachedTokens) {
  TestServer s;
  const std::string body = R"({"model":"test-model","instructions":")" + system_text() +
                           R"(","input":"Hi","max_output_tokens":3)";
  ASSERT_EQ(post(s.port(), "/v1/responses", body + "}").status, 200);
  const HttpReply r = post(s.port(), "/v1/responses", body + "}");
  const json::Value v = parse_body(r);
  EXPECT_EQ(str(v, "object"), "response");
  EXPECT_EQ(str(v, "id").rfind("resp_", 0), 0u);
  EXPECT_EQ(str(v, "status"), "incomplete");
  EXPECT_EQ(str(at(v, "incomplete_details"), "reason"), "max_output_tokens");
  const json::Value& usage = at(v, "usage");
  EXPECT_GT(num(at(usage, "input_tokens_details"), "cached_tokens"),
            static_cast<double>(system_text().size()) - 32);
  EXPECT_EQ(num(usage, "output_tokens"), 3);

  const HttpReply streamed = post(s.port(), "/v1/responses", body + R"(,"stream":true})");
  ASSERT_EQ(streamed.status, 200) << streamed.body;
  const std::vector<Event> events = events_of(streamed.body);
  ASSERT_GE(events.size(), 8u);
  EXPECT_EQ(events.front().name, "response.created");
  EXPECT_EQ(events[1].name, "response.in_progress");
  EXPECT_EQ(events.back().name, "response.incomplete");
  for (std::size_t i = 0; i < events.size(); ++i) {
    EXPECT_EQ(num(events[i].data, "sequence_number"), static_cast<double>(i));
    EXPECT_EQ(str(events[i].data, "type"), events[i].name);
  }
  const json::Value& final_usage = at(at(events.back().data, "response"), "usage");
  EXPECT_EQ(num(at(final_usage, "input_tokens_details"), "cached_tokens"),
            num(at(usage, "input_tokens_details"), "cached_tokens"));
}

TEST(AgentApiTest, ErrorsOnMessagesAreAnthropicShapedAndOnResponsesOpenAiShaped) {
  ServerOptions options;
  options.http.max_body_bytes = 4096;
  TestServer s(TestServerConfig{options});
  struct Case {
    std::string body;
    int status;
    std::string type;
  };
  const std::vector<Case> cases = {
      {"{not json", 400, "invalid_request_error"},
      {R"({"messages":[{"role":"user","content":"x"}]})", 400, "invalid_request_error"},
      {R"({"model":"claude-other","max_tokens":2,"messages":[{"role":"user","content":"x"}]})", 404,
       "not_found_error"},
      {R"({"max_tokens":2,"messages":[{"role":"user","content":")" + std::string(8000, 'a') +
           R"("}]})",
       413, "request_too_large"},  // refused by the server core before any handler
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.body.substr(0, 60));
    const HttpReply r = post(s.port(), "/v1/messages", c.body);
    EXPECT_EQ(r.status, c.status) << r.body;
    const json::Value v = parse_body(r);
    EXPECT_EQ(str(v, "type"), "error") << r.body;
    EXPECT_EQ(str(at(v, "error"), "type"), c.type) << r.body;
    EXPECT_TRUE(at(at(v, "error"), "message").is_string());
  }
  const HttpReply wrong_method = get(s.port(), "/v1/messages");
  EXPECT_EQ(wrong_method.status, 405);
  EXPECT_EQ(str(at(parse_body(wrong_method), "error"), "type"), "invalid_request_error");
  const HttpReply no_route = post(s.port(), "/v1/messages/batches", "{}");
  EXPECT_EQ(no_route.status, 404);
  EXPECT_EQ(str(at(parse_body(no_route), "error"), "type"), "not_found_error");

  const HttpReply stateful =
      post(s.port(), "/v1/responses", R"({"input":"x","previous_response_id":"resp_1"})");
  EXPECT_EQ(stateful.status, 400);
  EXPECT_EQ(str(at(parse_body(stateful), "error"), "param"), "previous_response_id");
}

}  // namespace
}  // namespace prefixgate::engine::server::testing
