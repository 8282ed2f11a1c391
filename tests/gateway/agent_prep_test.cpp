// A Messages or Responses request prepared through the thread's memos (canonicalize's tool-list
// memo, keyed by the client's bytes of its tools, and the gateway's memo of their client form)
// comes out as on its first sight and as the canonicalize functions make it without any memo:
// the native body (its unchanged members forwarded as the client's bytes), the chat body sent
// upstream, the reports and the prompt's hashes, under whichever rules apply.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "prefixgate/canonicalize/anthropic.h"
#include "prefixgate/canonicalize/json.h"
#include "prefixgate/canonicalize/responses_api.h"
#include "server/request_prep.h"

namespace prefixgate::gateway::server {
namespace {

struct Prep {
  explicit Prep(const CanonicalizationConfig& config)
      : stage(std::make_unique<CanonicalizeStage>(config)) {
    auto loaded = ModelRegistry::load({ModelConfig{}});
    EXPECT_TRUE(loaded.ok());
    models = std::move(*loaded);
    options.stage = stage.get();
    options.models = models.get();
  }
  std::unique_ptr<CanonicalizeStage> stage;
  std::unique_ptr<ModelRegistry> models;
  PrepOptions options;
};

// What the canonicalize functions make of `body` without a memo: the stage given no client
// bytes, the whole write-back, the client's body serialized whole. Its native and chat bodies.
struct Reference {
  std::string native;
  std::string chat;
};
Reference reference(const std::string& body, canon::Api api, const Prep& p) {
  json::Value client;
  canon::ChatConversion conversion;
  if (api == canon::Api::kMessages) {
    auto m = canon::parse_messages_request(body, p.options.limits);
    EXPECT_TRUE(m.ok()) << body;
    if (!m.ok()) return {};
    client = std::move(m->body);
    conversion = std::move(m->chat);
  } else {
    auto r = canon::parse_responses_request(body, p.options.limits);
    EXPECT_TRUE(r.ok()) << body;
    if (!r.ok()) return {};
    client = std::move(r->body);
    conversion = std::move(r->chat);
  }
  auto chat = canon::parse_request_value(conversion.body, canon::Endpoint::kChatCompletions,
                                         p.options.limits);
  EXPECT_TRUE(chat.ok());
  if (!chat.ok()) return {};
  if (p.stage->apply(*chat).body_changed) canon::write_back(conversion, *chat, client);
  return {json::to_json(client), json::to_json(chat->body)};
}

std::string normalized(const std::string& text) {
  auto doc = json::parse(text);
  EXPECT_TRUE(doc.ok()) << text;
  return doc.ok() ? json::to_json(*doc) : std::string();
}

std::string describe(const std::vector<StageChange>& changes) {
  std::string out;
  for (const StageChange& c : changes) {
    out += c.rule + " " + c.path + " " + c.detail +
           (c.mode == RuleMode::kRewrite ? " rewritten\n" : " observed\n");
  }
  return out;
}

std::string shuffled_object(std::vector<std::string> members, std::mt19937& rng) {
  std::shuffle(members.begin(), members.end(), rng);
  std::string out = "{";
  for (std::size_t i = 0; i < members.size(); ++i) out += (i ? " , " : "") + members[i];
  return out + "}";
}

// A random tool list in the API's shape: names out of order, schema keys in random order,
// numbers in several spellings, sometimes a timestamp in a description.
std::string random_tools(canon::Api api, std::mt19937& rng) {
  static const char* kNames[] = {"search", "add", "fetch", "zeta", "alpha", "run"};
  static const char* kDescriptions[] = {"Looks things up.", "As of 2026-08-20T14:33:07Z.",
                                        "Plain text \\n", "Epoch 1787236387 seconds"};
  static const char* kNumbers[] = {"1", "1.0", "1e2", "2.50", "-0"};
  std::vector<std::string> names(kNames, kNames + 6);
  std::shuffle(names.begin(), names.end(), rng);
  std::string list = "[";
  const std::size_t n = 1 + rng() % 4;
  for (std::size_t i = 0; i < n; ++i) {
    const std::string schema = shuffled_object(
        {R"("type":"object")",
         R"("properties":)" +
             shuffled_object(
                 {R"("q":{"type":"string"})",
                  std::string(R"("n":{"type":"number","minimum":)") + kNumbers[rng() % 5] + "}",
                  R"("d":{"description":")" + std::string(kDescriptions[rng() % 4]) + R"("})"},
                 rng)},
        rng);
    std::vector<std::string> tool = {
        R"("name":")" + names[i] + "\"",
        R"("description":")" + std::string(kDescriptions[rng() % 4]) + "\""};
    if (api == canon::Api::kMessages) {
      tool.push_back(R"("input_schema":)" + schema);
      if (rng() % 4 == 0) tool.push_back(R"("cache_control":{"type":"ephemeral"})");
    } else {
      tool.push_back(R"("type":"function")");
      tool.push_back(R"("parameters":)" + schema);
    }
    list += (i ? "," : "") + shuffled_object(tool, rng);
  }
  return list + "]";
}

std::string random_body(canon::Api api, const std::string& tools, std::mt19937& rng) {
  static const char* kSystems[] = {R"("Be brief.")", R"("Now: 2026-12-03 02:31:07 UTC")",
                                   R"("lines  \r\n with trailing  ")"};
  const std::string system = kSystems[rng() % 3];
  std::vector<std::string> members = {R"("model":"m")", R"("tools":)" + tools};
  if (api == canon::Api::kMessages) {
    members.push_back(R"("max_tokens":16)");
    members.push_back(R"("system":)" + system);
    members.push_back(R"("messages":[{"role":"user","content":"q )" + std::to_string(rng() % 9) +
                      R"("}])");
  } else {
    members.push_back(R"("instructions":)" + system);
    members.push_back(R"("input":"q )" + std::to_string(rng() % 9) + "\"");
  }
  if (rng() % 3 == 0) members.push_back(R"("cache_salt":"c")");
  return shuffled_object(members, rng);
}

CanonicalizationConfig config_with(RuleMode tools, RuleMode timestamp, RuleMode whitespace) {
  CanonicalizationConfig c;
  c.tool_json = c.tool_order = tools;
  c.timestamp = timestamp;
  c.whitespace = whitespace;
  return c;
}

// Random agent requests in both APIs, each tool list sent several times among others (as an
// agent's turns are), under four rule sets sharing the thread's memos: every preparation is the
// one without memos, and a repeat is byte for byte its first sight in a fresh thread.
TEST(AgentPrep, RepeatedToolListsPrepareAsWithoutTheMemos) {
  const std::vector<CanonicalizationConfig> configs = {
      CanonicalizationConfig{},
      config_with(RuleMode::kRewrite, RuleMode::kRewrite, RuleMode::kRewrite),
      config_with(RuleMode::kObserve, RuleMode::kObserve, RuleMode::kOff),
      config_with(RuleMode::kOff, RuleMode::kOff, RuleMode::kOff)};
  std::vector<std::unique_ptr<Prep>> preps;
  for (const auto& c : configs) preps.push_back(std::make_unique<Prep>(c));
  std::mt19937 rng(17);
  std::vector<std::pair<canon::Api, std::string>> lists;  // a few agents' tool lists
  for (int i = 0; i < 6; ++i) {
    const canon::Api api = i % 2 ? canon::Api::kResponses : canon::Api::kMessages;
    lists.emplace_back(api, random_tools(api, rng));
  }
  for (int i = 0; i < 240; ++i) {
    const auto& [api, tools] = lists[rng() % lists.size()];
    const Prep& p = *preps[rng() % preps.size()];
    const std::string body = random_body(api, tools, rng);
    const Tenant tenant{.name = "t", .isolate = rng() % 3 == 0};
    SCOPED_TRACE(body);
    auto prep = prepare_request(body, api, tenant, p.options);
    ASSERT_TRUE(prep.ok()) << prep.error().message;
    Result<PreparedRequest> first = PreparedRequest{};
    std::thread([&] { first = prepare_request(body, api, tenant, p.options); }).join();
    ASSERT_TRUE(first.ok());
    EXPECT_EQ(prep->agent.native_body.flattened(), first->agent.native_body.flattened());
    EXPECT_EQ(prep->upstream_body().flattened(), first->upstream_body().flattened());
    EXPECT_EQ(prep->block_hashes, first->block_hashes);
    EXPECT_EQ(describe(prep->changes), describe(first->changes));

    if (tenant.isolate) continue;  // the reference has no tenant salt
    const Reference ref = reference(body, api, p);
    EXPECT_EQ(normalized(prep->agent.native_body.flattened()), ref.native);
    EXPECT_EQ(normalized(prep->upstream_body().flattened()), ref.chat);
  }
}

// What the stage left alone is forwarded as the client sent it, spacing and all; the tools, which
// the rules re-ordered, are written in the client's shape, the same text on every turn.
TEST(AgentPrep, TheNativeBodyKeepsTheClientsBytesWhereNothingChanged) {
  const Prep p{CanonicalizationConfig{}};
  const std::string messages = R"([ {"role" : "user", "content" : "hi"} ])";
  const std::string body =
      R"({"model":"m", "max_tokens" : 16, "system" : "Be brief.", "messages": )" + messages +
      R"(, "tools":[{"name":"zeta","input_schema":{"type":"object","properties":{"b":{},"a":{}}}},)"
      R"({"name":"alpha","input_schema":{"type":"object"}}]})";
  std::string native;
  for (int turn = 0; turn < 3; ++turn) {
    auto prep = prepare_request(body, canon::Api::kMessages, Tenant{}, p.options);
    ASSERT_TRUE(prep.ok()) << prep.error().message;
    const std::string sent = prep->agent.native_body.flattened();
    EXPECT_NE(sent.find(R"("messages":)" + messages), std::string::npos) << sent;
    EXPECT_NE(sent.find(R"("tools":[{"name":"alpha","input_schema":{"type":"object"}},)"
                        R"({"name":"zeta","input_schema":{"properties":{"a":{},"b":{}},)"
                        R"("type":"object"}}]})"),
              std::string::npos)
        << sent;
    if (turn == 0) native = sent;
    EXPECT_EQ(sent, native);
  }
  // Nothing to rewrite: the body as it came.
  const std::string canonical =
      R"({"model":"m","max_tokens":16,"messages":[{"role":"user","content":"hi"}]})";
  auto prep = prepare_request(canonical, canon::Api::kMessages, Tenant{}, p.options);
  ASSERT_TRUE(prep.ok());
  EXPECT_EQ(prep->agent.native_body.flattened(), canonical);
}

}  // namespace
}  // namespace prefixgate::gateway::server
