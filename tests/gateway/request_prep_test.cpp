// The body the gateway sends upstream: what the rules rewrote is written again, every other
// top-level member is forwarded as the client's bytes, and the whole parses to the prepared body.
#include "server/request_prep.h"

#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <string>
#include <thread>

#include "prefixgate/canonicalize/json.h"
#include "prefixgate/canonicalize/lint.h"
#include "prefixgate/canonicalize/prompt.h"

namespace prefixgate::gateway::server {
namespace {

struct Prep {
  Prep() {
    CanonicalizationConfig canon;
    canon.tool_json = canon.tool_order = canon.response_format = canon.timestamp =
        canon.whitespace = RuleMode::kRewrite;
    stage = std::make_unique<CanonicalizeStage>(canon);
    auto loaded = ModelRegistry::load({ModelConfig{}});
    EXPECT_TRUE(loaded.ok());
    models = std::move(*loaded);
    options.stage = stage.get();
    options.models = models.get();
  }
  PreparedRequest run(const std::string& body, const Tenant& tenant = {}) {
    auto prep = prepare_request(body, canon::Api::kChatCompletions, tenant, options);
    EXPECT_TRUE(prep.ok()) << (prep.ok() ? "" : prep.error().message);
    return prep.ok() ? std::move(*prep) : PreparedRequest{};
  }
  std::unique_ptr<CanonicalizeStage> stage;
  std::unique_ptr<ModelRegistry> models;
  PrepOptions options;
};

// The prepared body and the one sent are the same document.
void ExpectSent(PreparedRequest& prep) {
  auto sent = json::parse(prep.upstream_body().flattened());
  ASSERT_TRUE(sent.ok()) << prep.upstream_body().flattened();
  EXPECT_EQ(json::to_json(*sent), json::to_json(prep.parsed.body));
}

TEST(UpstreamBody, UnchangedBodyIsForwardedAsSent) {
  Prep p;
  const std::string body = R"({ "model" : "m", "messages" : [ {"role":"user","content":"hi"} ] })";
  EXPECT_EQ(p.run(body).upstream_body().flattened(), body);
}

TEST(UpstreamBody, OnlyRewrittenMembersAreWrittenAgain) {
  Prep p;
  const std::string messages = R"([ {"role":"user", "content":"what is up"} ])";
  const std::string body = R"({"model":"m", "messages": )" + messages +
                           R"(, "tools":[{"type":"function","function":{"name":"b","parameters":)"
                           R"({"type":"object","properties":{"z":{},"a":{}}}}},)"
                           R"({"type":"function","function":{"name":"a"}}], "stream": true})";
  PreparedRequest prep = p.run(body);
  ExpectSent(prep);
  // The messages as the client spaced them; the tools sorted, in canonical form.
  EXPECT_NE(prep.upstream_body().flattened().find(R"("messages":)" + messages), std::string::npos)
      << prep.upstream_body().flattened();
  EXPECT_NE(prep.upstream_body().flattened().find(R"("tools":[{"function":{"name":"a"})"),
            std::string::npos)
      << prep.upstream_body().flattened();
  EXPECT_NE(prep.upstream_body().flattened().find(R"("stream_options":{"include_usage":true})"),
            std::string::npos);
}

TEST(UpstreamBody, RewrittenMessagesAndSaltAreWrittenAgain) {
  Prep p;
  const std::string body =
      R"({"model":"m","cache_salt":"c","messages":[{"role":"system","content":)"
      R"("Today is 2026-12-02T10:31:07Z.  \r\n"},{"role":"user","content":"hi"}]})";
  PreparedRequest prep = p.run(body, Tenant{.name = "team", .isolate = true});
  ExpectSent(prep);
  EXPECT_EQ(prep.upstream_body().flattened().find("10:31:07"), std::string::npos)
      << prep.upstream_body().flattened();
  EXPECT_NE(prep.upstream_body().flattened().find("prefixgate-tenant:team/c"), std::string::npos);
}

// Random requests over every rule: whatever was rewritten, the sent body is the prepared one.
TEST(UpstreamBody, RandomRequestsSendThePreparedBody) {
  Prep p;
  std::mt19937 rng(5);
  const std::string system[] = {R"("plain system")", R"("at 2026-01-02 03:04:05 UTC")",
                                R"("lines  \r\n with trailing  ")",
                                R"([{"type":"text","text":"x"}])"};
  const std::string tools[] = {
      "",
      R"(,"tools":[{"type":"function","function":{"name":"z"}},{"type":"function","function":{"name":"a"}}])",
      R"(,"tools":[{"function":{"name":"a","parameters":{"b":1,"a":2.50}},"type":"function"}])"};
  const std::string extra[] = {
      "", R"(,"stream":true)", R"(,"stream":true,"stream_options":{"include_usage":false})",
      R"(,"response_format":{"type":"json_schema","json_schema":{"y":1,"x":[1e2]}})",
      R"(,"temperature":0.70 , "user":"u")"};
  for (int i = 0; i < 300; ++i) {
    const std::string body = R"({"model":"m", "messages":[{"role":"system","content":)" +
                             system[rng() % 4] + R"(},{"role":"user","content":"q )" +
                             std::to_string(i) + R"("}])" + tools[rng() % 3] + extra[rng() % 5] +
                             extra[rng() % 2] + "}";
    const Tenant tenant{.name = rng() % 2 ? "t" : "", .isolate = rng() % 2 == 0};
    auto prep = prepare_request(body, canon::Api::kChatCompletions, tenant, p.options);
    if (!prep.ok()) continue;  // a duplicate "stream" key, say
    ExpectSent(*prep);
  }
}

// An agent's tools, sent again on every turn, come from the thread's memo after the first: the
// body sent and the prompt's hashes are those of the first sight, in a thread that never saw
// the list.
TEST(UpstreamBody, ARepeatedToolListPreparesAsOnItsFirstSight) {
  Prep p;
  const std::string body =
      R"({"model":"m","messages":[{"role":"user","content":"hi"}],"tools":[)"
      R"({"type":"function","function":{"name":"zeta","description":"At 2026-12-02T10:31:07Z",)"
      R"("parameters":{"type":"object","properties":{"b":{"minimum":1.0},"a":{}}}}},)"
      R"({"function":{"name":"alpha"},"type":"function"}]})";
  PreparedRequest first;
  std::thread([&] { first = p.run(body); }).join();
  ExpectSent(first);
  for (int i = 0; i < 3; ++i) {
    PreparedRequest again = p.run(body);
    ExpectSent(again);
    EXPECT_EQ(again.upstream_body().flattened(), first.upstream_body().flattened());
    EXPECT_EQ(again.block_hashes, first.block_hashes);
  }
  EXPECT_NE(first.upstream_body().flattened().find(R"("tools":[{"function":{"name":"alpha"})"),
            std::string::npos)
      << first.upstream_body().flattened();
}

// A Messages request: its chat equivalent is sent with each tool list written once (the text the
// prompt also takes), and the prompt's hashes are those of rendering the tools from the tree.
TEST(UpstreamBody, AMessagesRequestSendsItsChatBodyAndRendersItsToolsFromOneText) {
  Prep p;
  const std::string body =
      R"({"model":"m","max_tokens":16,"system":"Be brief.","messages":[{"role":"user",)"
      R"("content":"hi"}],"tools":[{"name":"zeta","description":"z","input_schema":)"
      R"({"type":"object","properties":{"b":{"minimum":1.0},"a":{}}}},)"
      R"({"name":"alpha","input_schema":{"type":"object"}}]})";
  auto prep = prepare_request(body, canon::Api::kMessages, Tenant{}, p.options);
  ASSERT_TRUE(prep.ok()) << prep.error().message;
  ExpectSent(*prep);
  const canon::ToolListText* text = canon::tool_list_text(prep->parsed, "tools");
  ASSERT_NE(text, nullptr);
  EXPECT_EQ(text->json, json::to_json(*prep->parsed.body.find("tools")));
  EXPECT_NE(prep->upstream_body().flattened().find(text->json), std::string::npos);
  canon::ParsedRequest from_tree = prep->parsed;
  from_tree.tool_texts.clear();
  const auto analyzed =
      canon::analyze_prompt(from_tree, p.models->for_model(from_tree.model).prompt_model);
  ASSERT_TRUE(analyzed.ok());
  EXPECT_EQ(prep->block_hashes, analyzed->block_hashes);
}

// The findings a request's preparation counts are lint_prompt()'s of its prompt (the final user
// message left out), field, excerpt, token and byte each: the first time, when the scans are
// made, and again, when the prompt memo's kept scans are looked up.
TEST(PromptFindings, AreLintsFindingsOfThePrompt) {
  Prep p;
  p.options.lint = true;
  const std::string body =
      R"({"model":"m","messages":[{"role":"system","content":"Opens at 14:00 CET, id )"
      R"(3f2b8c1e-9a4d-4e21-8f3b-2c9d7e6a1b05; call before 17:30."},)"
      R"({"role":"user","content":"Order 18:45 please"},)"
      R"({"role":"assistant","content":"Noted at 2026-12-07T10:00:00Z."},)"
      R"({"role":"user","content":"And at 19:00?"}]})";
  for (int round = 0; round < 2; ++round) {
    SCOPED_TRACE(round);
    PreparedRequest prep = p.run(body);
    auto analyzed = canon::analyze_prompt(prep.parsed, p.models->for_model("m").prompt_model);
    ASSERT_TRUE(analyzed.ok());
    const canon::PromptLint expected =
        canon::lint_prompt(*analyzed, {.explain = false, .volatile_tail = false});
    ASSERT_EQ(prep.findings.size(), expected.findings.size());
    ASSERT_GE(prep.findings.size(), 4u);
    for (std::size_t i = 0; i < expected.findings.size(); ++i) {
      const canon::Finding& f = expected.findings[i];
      EXPECT_EQ(prep.findings[i].rule, canon::rule_id(f.rule));
      EXPECT_EQ(prep.findings[i].field, f.field);
      EXPECT_EQ(prep.findings[i].excerpt, f.excerpt);
      EXPECT_EQ(prep.findings[i].token_offset, f.token_offset);
      EXPECT_EQ(prep.findings[i].byte_offset, f.prompt_begin);
    }
    EXPECT_EQ(prep.findings.front().field, "messages[0].content");
  }
}

}  // namespace
}  // namespace prefixgate::gateway::server
