#include "server/openai_protocol.h"

#include <gtest/gtest.h>

#include "prefixgate/canonicalize/json.h"

namespace prefixgate::engine::server {
namespace {

ServedModel model() {
  ServedModel m;
  m.name = "m";
  m.tokenizer = canon::make_byte_tokenizer();
  m.max_model_len = 64;
  m.vocab_size = 300;
  return m;
}

TEST(OpenAiProtocolTest, ReadsSamplingFields) {
  auto plan = plan_generation(
      R"({"prompt":"hi","temperature":0,"top_p":0.5,"top_k":7,"seed":42,"max_tokens":9,)"
      R"("stop":"x","ignore_eos":true,"cache_salt":"tenant","stream":true,)"
      R"("stream_options":{"include_usage":true}})",
      canon::Endpoint::kCompletions, model());
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  const SamplingParams& s = plan->request.sampling;
  EXPECT_EQ(s.temperature, 0);
  EXPECT_EQ(s.top_p, 0.5);
  EXPECT_EQ(s.top_k, 7);
  EXPECT_EQ(s.seed, 42u);
  EXPECT_EQ(s.max_tokens, 9u);
  EXPECT_EQ(s.stop, std::vector<std::string>{"x"});
  EXPECT_TRUE(s.ignore_eos);
  EXPECT_EQ(plan->request.salt, "tenant");
  EXPECT_EQ(plan->request.prompt, (std::vector<canon::TokenId>{'h', 'i'}));
  EXPECT_TRUE(plan->stream);
  EXPECT_TRUE(plan->include_usage);
}

TEST(OpenAiProtocolTest, DefaultsAndContextLimits) {
  auto plan = plan_generation(R"({"prompt":"hi"})", canon::Endpoint::kCompletions, model());
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->request.sampling.max_tokens, 16u);
  auto chat = plan_generation(R"({"messages":[{"role":"user","content":"hi"}]})",
                              canon::Endpoint::kChatCompletions, model());
  ASSERT_TRUE(chat.ok());
  EXPECT_EQ(chat->request.sampling.max_tokens, 64 - chat->request.prompt.size());

  auto too_long = plan_generation(R"({"prompt":")" + std::string(64, 'a') + R"("})",
                                  canon::Endpoint::kCompletions, model());
  ASSERT_FALSE(too_long.ok());
  EXPECT_EQ(too_long.error().param, "prompt");
  auto too_many =
      plan_generation(R"({"prompt":"a","max_tokens":64})", canon::Endpoint::kCompletions, model());
  ASSERT_FALSE(too_many.ok());
  EXPECT_EQ(too_many.error().param, "max_tokens");
  auto bad_id = plan_generation(R"({"prompt":[1,300]})", canon::Endpoint::kCompletions, model());
  ASSERT_FALSE(bad_id.ok());
  EXPECT_EQ(http_status(bad_id.error()), 400);
}

TEST(OpenAiProtocolTest, RejectsWhatItCannotServe) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"prompt":"a","n":3})", "n"},
      {R"({"prompt":"a","top_k":1.5})", "top_k"},
      {R"({"prompt":"a","temperature":3})", "temperature"},
      {R"({"prompt":"a","ignore_eos":1})", "ignore_eos"},
      {R"({"prompt":"a","stream":true,"stream_options":{"include_usage":"y"}})",
       "stream_options.include_usage"},
      {R"({"prompt":["a","b"]})", "prompt"},
  };
  for (const auto& [body, param] : cases) {
    auto plan = plan_generation(body, canon::Endpoint::kCompletions, model());
    ASSERT_FALSE(plan.ok()) << body;
    EXPECT_EQ(plan.error().param, param) << body;
    EXPECT_EQ(http_status(plan.error()), 400) << body;
  }
}

TEST(OpenAiProtocolTest, ResponseShapes) {
  const ResponseMeta meta = make_response_meta(canon::Endpoint::kChatCompletions, "m");
  EXPECT_EQ(meta.id.rfind("chatcmpl-", 0), 0u);
  auto body = json::parse(
      completion_body(canon::Endpoint::kChatCompletions, meta, "hey", "stop", Usage{5, 2, 3}));
  ASSERT_TRUE(body.ok());
  EXPECT_EQ(json::to_json(*body->find("usage")),
            R"({"prompt_tokens":5,"completion_tokens":2,"total_tokens":7,)"
            R"("prompt_tokens_details":{"cached_tokens":3}})");
  EXPECT_EQ(json::to_json(*body->find("choices")),
            R"([{"index":0,"message":{"role":"assistant","content":"hey"},"logprobs":null,)"
            R"("finish_reason":"stop"}])");
  auto chunk = json::parse(stream_chunk(canon::Endpoint::kCompletions, meta, "t", "", false, true));
  ASSERT_TRUE(chunk.ok());
  EXPECT_TRUE(chunk->find("usage")->is_null());
  EXPECT_EQ(json::to_json(*chunk->find("choices")),
            R"([{"index":0,"text":"t","logprobs":null,"finish_reason":null}])");
}

}  // namespace
}  // namespace prefixgate::engine::server
