// The server over real sockets: OpenAI completions and chat, streaming, prefix-cache usage,
// errors, metrics, health, client disconnects and graceful drain.
#include <gtest/gtest.h>

#include "test_client.h"
#include "test_server.h"

namespace prefixgate::engine::server::testing {
namespace {

std::string long_prompt() {
  std::string p;
  for (int i = 0; i < 20; ++i) p += "The quick brown fox jumps over the lazy dog. ";
  return p;
}

const json::Value& choice0(const json::Value& body) {
  static const json::Value null;
  const json::Value& choices = at(body, "choices");
  return choices.is_array() && !choices.as_array().empty() ? choices.as_array()[0] : null;
}

TEST(HttpServerTest, CompletionReturnsOpenAiResponseWithUsage) {
  TestServer s;
  ASSERT_NE(s.port(), 0);
  const HttpReply r = post(s.port(), "/v1/completions",
                           R"({"model":"test-model","prompt":"Hello there","max_tokens":5})");
  ASSERT_EQ(r.status, 200) << r.body;
  const json::Value body = parse_body(r);
  EXPECT_EQ(str(body, "object"), "text_completion");
  EXPECT_EQ(str(body, "id").rfind("cmpl-", 0), 0u);
  EXPECT_EQ(str(body, "model"), "test-model");
  EXPECT_GT(num(body, "created"), 1.6e9);
  EXPECT_EQ(str(choice0(body), "finish_reason"), "length");
  EXPECT_TRUE(at(choice0(body), "text").is_string());
  const json::Value& usage = at(body, "usage");
  EXPECT_EQ(num(usage, "prompt_tokens"), 11);  // byte tokenizer: one token per byte
  EXPECT_EQ(num(usage, "completion_tokens"), 5);
  EXPECT_EQ(num(usage, "total_tokens"), 16);
  EXPECT_EQ(num(at(usage, "prompt_tokens_details"), "cached_tokens"), 0);
}

TEST(HttpServerTest, CompletionAcceptsTokenIdsAndChatUsesTheTemplate) {
  TestServer s;
  HttpReply r = post(s.port(), "/v1/completions", R"({"prompt":[72,105,33],"max_tokens":2})");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(num(at(parse_body(r), "usage"), "prompt_tokens"), 3);

  r = post(s.port(), "/v1/chat/completions",
           R"({"messages":[{"role":"user","content":"Hi"}],"max_completion_tokens":3})");
  ASSERT_EQ(r.status, 200) << r.body;
  const json::Value body = parse_body(r);
  EXPECT_EQ(str(body, "object"), "chat.completion");
  EXPECT_EQ(str(at(choice0(body), "message"), "role"), "assistant");
  EXPECT_TRUE(at(at(choice0(body), "message"), "content").is_string());
  // The llama-3 template wraps "Hi" in header and turn tokens: far more than 2 tokens.
  EXPECT_GT(num(at(body, "usage"), "prompt_tokens"), 10);
  EXPECT_EQ(num(at(body, "usage"), "completion_tokens"), 3);
}

TEST(HttpServerTest, RepeatedLongPrefixReportsCachedTokens) {
  TestServer s;
  const std::string body = R"({"prompt":")" + long_prompt() + R"(","max_tokens":2})";
  ASSERT_EQ(post(s.port(), "/v1/completions", body).status, 200);
  const HttpReply second = post(s.port(), "/v1/completions", body);
  ASSERT_EQ(second.status, 200) << second.body;
  const json::Value usage = at(parse_body(second), "usage");
  const double cached = num(at(usage, "prompt_tokens_details"), "cached_tokens");
  EXPECT_GT(cached, 0);
  EXPECT_EQ(static_cast<std::size_t>(cached) % 16, 0u);  // whole pages
  EXPECT_LT(cached, num(usage, "prompt_tokens"));
}

TEST(HttpServerTest, StreamingCompletionSendsChunksDoneAndUsage) {
  TestServer s;
  Client c(s.port());
  ASSERT_TRUE(c.send(http::verb::post, "/v1/completions",
                     R"({"prompt":"abc","max_tokens":8,"stream":true,)"
                     R"("stream_options":{"include_usage":true}})"));
  const HttpReply r = c.read_all();
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.content_type, "text/event-stream");
  const SseEvents sse = parse_sse(r.body);
  ASSERT_TRUE(sse.well_formed) << r.body;
  ASSERT_TRUE(sse.done);
  ASSERT_GE(sse.chunks.size(), 2u);
  // The last chunk carries usage and no choices; the one before it, the finish reason.
  const json::Value& usage_chunk = sse.chunks.back();
  EXPECT_TRUE(at(usage_chunk, "choices").as_array().empty());
  EXPECT_EQ(num(at(usage_chunk, "usage"), "completion_tokens"), 8);
  EXPECT_EQ(num(at(usage_chunk, "usage"), "prompt_tokens"), 3);
  const json::Value& last = sse.chunks[sse.chunks.size() - 2];
  EXPECT_EQ(str(choice0(last), "finish_reason"), "length");
  for (std::size_t i = 0; i + 1 < sse.chunks.size(); ++i) {
    EXPECT_EQ(str(sse.chunks[i], "object"), "text_completion");
    EXPECT_TRUE(at(sse.chunks[i], "usage").is_null());
  }

  // The streamed text equals the non-streamed text for the same deterministic request.
  std::string streamed;
  for (std::size_t i = 0; i + 1 < sse.chunks.size(); ++i) {
    streamed += str(choice0(sse.chunks[i]), "text");
  }
  const HttpReply plain = post(s.port(), "/v1/completions", R"({"prompt":"abc","max_tokens":8})");
  EXPECT_EQ(streamed, str(choice0(parse_body(plain)), "text"));
}

TEST(HttpServerTest, StreamingChatStartsWithRoleAndEndsWithFinishReason) {
  TestServer s;
  Client c(s.port());
  ASSERT_TRUE(
      c.send(http::verb::post, "/v1/chat/completions",
             R"({"messages":[{"role":"user","content":"Hi"}],"max_tokens":4,"stream":true})"));
  const HttpReply r = c.read_all();
  ASSERT_EQ(r.status, 200);
  const SseEvents sse = parse_sse(r.body);
  ASSERT_TRUE(sse.done && sse.well_formed) << r.body;
  ASSERT_GE(sse.chunks.size(), 2u);
  EXPECT_EQ(str(sse.chunks.front(), "object"), "chat.completion.chunk");
  EXPECT_EQ(str(at(choice0(sse.chunks.front()), "delta"), "role"), "assistant");
  EXPECT_EQ(str(choice0(sse.chunks.back()), "finish_reason"), "length");
  EXPECT_EQ(at(sse.chunks.back(), "usage").type(), json::Type::kNull);  // absent: not asked
}

TEST(HttpServerTest, StopStringTruncatesOutput) {
  TestServer s;
  const std::string req = R"({"prompt":"stop test prompt","max_tokens":200,"ignore_eos":true)";
  const HttpReply full = post(s.port(), "/v1/completions", req + "}");
  ASSERT_EQ(full.status, 200);
  const std::string text = str(choice0(parse_body(full)), "text");
  // Pick a printable ASCII character from the deterministic output as the stop string.
  std::size_t at_index = text.size();
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] >= 'a' && text[i] <= 'z') {
      at_index = i;
      break;
    }
  }
  ASSERT_LT(at_index, text.size()) << "no letter in the output to stop on";
  const std::string stop(1, text[at_index]);
  const HttpReply stopped =
      post(s.port(), "/v1/completions", req + R"(,"stop":[")" + stop + R"("]})");
  ASSERT_EQ(stopped.status, 200) << stopped.body;
  const json::Value body = parse_body(stopped);
  EXPECT_EQ(str(choice0(body), "finish_reason"), "stop");
  EXPECT_EQ(str(choice0(body), "text"), text.substr(0, at_index));
}

TEST(HttpServerTest, BadRequestsGetOpenAiErrors) {
  ServerOptions options;
  options.http.max_body_bytes = 4096;
  TestServer s(TestServerConfig{options});
  struct Case {
    std::string target, body;
    int status;
    std::string param;
  };
  const std::vector<Case> cases = {
      {"/v1/completions", "{not json", 400, ""},
      {"/v1/completions", R"({"prompt":"x","max_tokens":"ten"})", 400, "max_tokens"},
      {"/v1/completions", R"({"prompt":"x","temperature":"hot"})", 400, "temperature"},
      {"/v1/completions", R"({"prompt":"x","n":2})", 400, "n"},
      {"/v1/completions", R"({"prompt":"x","stop":[1]})", 400, "stop[0]"},
      {"/v1/completions", R"({"prompt":"x","model":"other"})", 404, "model"},
      {"/v1/chat/completions", R"({"messages":"hi"})", 400, "messages"},
      {"/v1/completions", R"({"prompt":")" + std::string(8000, 'a') + R"("})", 413, ""},
      {"/v1/nothing", "{}", 404, ""},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.target + " " + c.body.substr(0, 60));
    const HttpReply r = post(s.port(), c.target, c.body);
    EXPECT_EQ(r.status, c.status) << r.body;
    auto v = json::parse(r.body);
    ASSERT_TRUE(v.ok()) << r.body;
    const json::Value& error = at(*v, "error");
    ASSERT_TRUE(error.is_object()) << r.body;
    EXPECT_TRUE(at(error, "message").is_string());
    EXPECT_EQ(str(error, "type"), "invalid_request_error");
    if (!c.param.empty()) {
      EXPECT_EQ(str(error, "param"), c.param) << r.body;
    }
  }
  const HttpReply wrong_method = get(s.port(), "/v1/completions");
  EXPECT_EQ(wrong_method.status, 405);
  EXPECT_TRUE(at(parse_body(wrong_method), "error").is_object());
}

TEST(HttpServerTest, KeepAliveServesSeveralRequestsOnOneConnection) {
  TestServer s;
  Client c(s.port());
  for (int i = 0; i < 3; ++i) {
    c.reset_parser();
    ASSERT_TRUE(c.send(http::verb::post, "/v1/completions", R"({"prompt":"k","max_tokens":1})"));
    EXPECT_EQ(c.read_all().status, 200);
  }
}

TEST(HttpServerTest, ModelsHealthAndMetrics) {
  TestServer s;
  const HttpReply models = get(s.port(), "/v1/models");
  ASSERT_EQ(models.status, 200);
  EXPECT_EQ(str(at(parse_body(models), "data").as_array().at(0), "id"), "test-model");
  EXPECT_EQ(get(s.port(), "/health").status, 200);

  ASSERT_EQ(post(s.port(), "/v1/completions", R"({"prompt":"metrics","max_tokens":3})").status,
            200);
  const HttpReply m = get(s.port(), "/metrics");
  ASSERT_EQ(m.status, 200);
  for (const char* family :
       {"prefixgate_engine_prefix_cache_queries_total", "prefixgate_engine_prefix_cache_hits_total",
        "prefixgate_engine_kv_pages_used", "prefixgate_engine_kv_pages_total",
        "prefixgate_engine_kv_cache_usage_ratio", "prefixgate_engine_num_requests_running",
        "prefixgate_engine_num_requests_waiting", "prefixgate_engine_num_preemptions_total",
        "prefixgate_engine_shared_prefill_waits_total", "prefixgate_engine_prompt_tokens_total",
        "prefixgate_engine_generation_tokens_total",
        "prefixgate_engine_time_to_first_token_seconds_bucket",
        "prefixgate_engine_inter_token_latency_seconds_count",
        "prefixgate_engine_e2e_request_latency_seconds_sum"}) {
    EXPECT_NE(m.body.find(std::string("\n") + family), std::string::npos) << family;
  }
  EXPECT_NE(m.body.find("prefixgate_engine_generation_tokens_total 3\n"), std::string::npos)
      << m.body;
  EXPECT_NE(m.body.find("prefixgate_engine_kv_pages_total 256\n"), std::string::npos);
  EXPECT_NE(m.body.find("prefixgate_engine_e2e_request_latency_seconds_count 1\n"),
            std::string::npos);
}

TEST(HttpServerTest, ClientDisconnectMidStreamFreesPages) {
  TestServer s(TestServerConfig{{}, 256, 100000, std::chrono::microseconds(500)});
  Client c(s.port());
  ASSERT_TRUE(c.send(http::verb::post, "/v1/completions",
                     R"({"prompt":")" + long_prompt() +
                         R"(","max_tokens":50000,"ignore_eos":true,"stream":true})"));
  ASSERT_TRUE(c.read_header());
  // Wait until generation has visibly started.
  ASSERT_TRUE(c.read_until([](const std::string& b) { return b.find("data: ") != b.npos; }));
  EXPECT_EQ(s.engine().stats().scheduler.running, 1u);
  c.close();
  ASSERT_TRUE(eventually([&] {
    const EngineStats st = s.engine().stats();
    return st.scheduler.running == 0 && st.kv_pages_used == st.kv_pages_cached;
  })) << "used "
      << s.engine().stats().kv_pages_used << " cached " << s.engine().stats().kv_pages_cached;
}

TEST(HttpServerTest, ClientDisconnectDuringNonStreamingRequestAbortsIt) {
  TestServer s(TestServerConfig{{}, 256, 100000, std::chrono::microseconds(500)});
  Client c(s.port());
  ASSERT_TRUE(c.send(http::verb::post, "/v1/completions",
                     R"({"prompt":"abandon","max_tokens":50000,"ignore_eos":true})"));
  ASSERT_TRUE(eventually([&] { return s.engine().stats().scheduler.running == 1; }));
  c.close();
  ASSERT_TRUE(eventually([&] {
    const EngineStats st = s.engine().stats();
    return st.scheduler.running == 0 && st.kv_pages_used == st.kv_pages_cached;
  }));
}

TEST(HttpServerTest, GracefulShutdownCompletesInFlightRequest) {
  TestServer s(TestServerConfig{{}, 256, 100000, std::chrono::microseconds(500)});
  Client c(s.port());
  ASSERT_TRUE(c.send(http::verb::post, "/v1/completions",
                     R"({"prompt":"drain me","max_tokens":300,"ignore_eos":true,"stream":true})"));
  ASSERT_TRUE(c.read_header());
  ASSERT_TRUE(c.read_until([](const std::string& b) { return b.find("data: ") != b.npos; }));
  std::thread stopper([&] { s.stop(); });
  const HttpReply r = c.read_all();
  stopper.join();
  EXPECT_EQ(r.status, 200);
  const SseEvents sse = parse_sse(r.body);
  ASSERT_TRUE(sse.done) << r.body.substr(0, 200);
  EXPECT_EQ(str(choice0(sse.chunks.back()), "finish_reason"), "length");
  // And the listener is gone.
  Client late(s.port());
  EXPECT_FALSE(late.connected() && late.send(http::verb::get, "/health") &&
               late.read_all().status == 200);
}

}  // namespace
}  // namespace prefixgate::engine::server::testing
