// The workload generators: seeded and reproducible, and sharing exactly what they claim to.
#include "workloads/workloads.h"

#include <gtest/gtest.h>

#include "ceiling.h"
#include "prefixgate/canonicalize/policy.h"
#include "prefixgate/canonicalize/prompt.h"
#include "prefixgate/canonicalize/request.h"

namespace prefixgate::bench {
namespace {

std::vector<canon::TokenId> tokens_of(const Turn& turn) {
  static const auto tokenizer = canon::make_byte_tokenizer();
  auto req = canon::parse_request(turn.body, turn.api == Api::kCompletions
                                                 ? canon::Endpoint::kCompletions
                                                 : canon::Endpoint::kChatCompletions);
  EXPECT_TRUE(req.ok()) << (req.ok() ? "" : req.error().message);
  if (!req) return {};
  const canon::PromptModel model{canon::ChatTemplate::kLlama3, tokenizer.get(), 16, "builtin:tiny"};
  auto prompt = canon::analyze_prompt(*req, model);
  EXPECT_TRUE(prompt) << prompt.error().message;
  return prompt ? prompt->tokens.tokens : std::vector<canon::TokenId>{};
}

std::vector<std::string> bodies(const Workload& w) {
  std::vector<std::string> out;
  for (const Session& s : w.sessions) {
    for (const Turn& t : s.turns) out.push_back(t.body);
  }
  return out;
}

SharedPrefixOptions small_shared_prefix() {
  SharedPrefixOptions o;
  o.groups = 4;
  o.prompts_per_group = 3;
  o.system_len = 200;
  o.question_len = 20;
  o.output_len = 8;
  return o;
}

TEST(WorkloadsTest, SameSeedGivesTheSameRequests) {
  EXPECT_EQ(bodies(make_shared_prefix(small_shared_prefix(), 7)),
            bodies(make_shared_prefix(small_shared_prefix(), 7)));
  EXPECT_NE(bodies(make_shared_prefix(small_shared_prefix(), 7)),
            bodies(make_shared_prefix(small_shared_prefix(), 8)));
  MultiTurnOptions mt;
  mt.conversations = 3;
  mt.turns = 3;
  EXPECT_EQ(bodies(make_multi_turn(mt, 3)), bodies(make_multi_turn(mt, 3)));
  AgentOptions ag;
  ag.agents = 2;
  ag.steps = 3;
  EXPECT_EQ(bodies(make_agent(ag, 3)), bodies(make_agent(ag, 3)));
  VolatileOptions vo;
  vo.requests = 5;
  EXPECT_EQ(bodies(make_volatile(vo, 3)), bodies(make_volatile(vo, 3)));
}

TEST(WorkloadsTest, SharedPrefixGroupsShareExactlyTheSystemPrompt) {
  const SharedPrefixOptions o = small_shared_prefix();
  const Workload w = make_shared_prefix(o, 1);
  ASSERT_EQ(w.sessions.size(), o.groups * o.prompts_per_group);
  // Group requests by their first system_len tokens: exactly `groups` groups of
  // `prompts_per_group`, and within a group nothing is shared past the system prompt + "\n\n"
  // (the questions are independent draws; a shared first letter is chance, so allow a little).
  std::map<std::vector<canon::TokenId>, std::vector<std::vector<canon::TokenId>>> groups;
  for (const Session& s : w.sessions) {
    ASSERT_EQ(s.turns.size(), 1u);
    EXPECT_EQ(s.turns[0].max_tokens, o.output_len);
    const auto tokens = tokens_of(s.turns[0]);
    ASSERT_EQ(tokens.size(), o.system_len + 2 + o.question_len);  // byte tokenizer, no BOS
    groups[{tokens.begin(), tokens.begin() + static_cast<std::ptrdiff_t>(o.system_len)}].push_back(
        tokens);
  }
  ASSERT_EQ(groups.size(), o.groups);
  for (const auto& [system, members] : groups) {
    ASSERT_EQ(members.size(), o.prompts_per_group);
    for (std::size_t i = 1; i < members.size(); ++i) {
      const std::size_t common = canon::common_prefix_length(members[0], members[i]);
      EXPECT_GE(common, o.system_len + 2);
      EXPECT_LT(common, o.system_len + 2 + 4);
    }
  }
  // Different groups share less than a block.
  auto it = groups.begin();
  const auto& a = it->second[0];
  const auto& b = (++it)->second[0];
  EXPECT_LT(canon::common_prefix_length(a, b), 16u);
}

TEST(WorkloadsTest, MultiTurnTurnsExtendThePreviousPrompt) {
  MultiTurnOptions o;
  o.conversations = 2;
  o.turns = 4;
  o.system_len = 100;
  o.user_len = 30;
  o.output_len = 20;
  const Workload w = make_multi_turn(o, 1);
  ASSERT_EQ(w.sessions.size(), 2u);
  for (const Session& s : w.sessions) {
    ASSERT_EQ(s.turns.size(), 4u);
    EXPECT_EQ(s.turns[0].think_time_s, 0);
    for (std::size_t t = 1; t < s.turns.size(); ++t) {
      const auto prev = tokens_of(s.turns[t - 1]);
      const auto next = tokens_of(s.turns[t]);
      EXPECT_EQ(canon::common_prefix_length(prev, next), prev.size()) << "turn " << t;
      EXPECT_GT(s.turns[t].think_time_s, 0);
    }
  }
  // Conversations share the system prompt.
  EXPECT_GE(canon::common_prefix_length(tokens_of(w.sessions[0].turns[0]),
                                        tokens_of(w.sessions[1].turns[0])),
            o.system_len);
}

TEST(WorkloadsTest, AgentStepsExtendThePreviousPromptAndShareTheTools) {
  AgentOptions o;
  o.agents = 2;
  o.steps = 3;
  o.tools = 4;
  const Workload w = make_agent(o, 1);
  for (const Session& s : w.sessions) {
    for (std::size_t t = 1; t < s.turns.size(); ++t) {
      const auto prev = tokens_of(s.turns[t - 1]);
      EXPECT_EQ(canon::common_prefix_length(prev, tokens_of(s.turns[t])), prev.size());
    }
  }
  // The tools (rendered into the system turn) and the system prompt are common to every run.
  EXPECT_GT(canon::common_prefix_length(tokens_of(w.sessions[0].turns[0]),
                                        tokens_of(w.sessions[1].turns[0])),
            o.tools * o.tool_schema_len);
}

// --api messages and --api responses send the same agent loop in another API: each request is
// valid there, and renders (as its chat equivalent) into the chat loop's tokens once the tool
// definitions are in canonical form, as the gateway forwards them by default.
TEST(WorkloadsTest, AgentLoopInEachApiRendersTheChatLoopsTokens) {
  AgentOptions o;
  o.agents = 2;
  o.steps = 3;
  o.tools = 3;
  const Workload chat = make_agent(o, 5);
  for (Api api : {Api::kMessages, Api::kResponses}) {
    o.api = api;
    const Workload w = make_agent(o, 5);
    ASSERT_EQ(w.requests(), chat.requests());
    for (std::size_t s = 0; s < w.sessions.size(); ++s) {
      for (std::size_t t = 0; t < w.sessions[s].turns.size(); ++t) {
        const Turn& turn = w.sessions[s].turns[t];
        EXPECT_EQ(turn.api, api);
        auto parsed = parse_turn(turn);
        ASSERT_TRUE(parsed) << parsed.error().param << ": " << parsed.error().message;
        static const auto tokenizer = canon::make_byte_tokenizer();
        const canon::PromptModel model{canon::ChatTemplate::kLlama3, tokenizer.get(), 16,
                                       "builtin:tiny"};
        auto chat_turn =
            canon::parse_request(chat.sessions[s].turns[t].body, canon::Endpoint::kChatCompletions);
        ASSERT_TRUE(chat_turn);
        canon::CanonicalizationPolicy tools_only = canon::CanonicalizationPolicy::none();
        tools_only.tool_json = tools_only.tool_order = true;
        for (canon::ParsedRequest* r : {&*parsed, &*chat_turn}) {
          (void)canon::canonicalize_in_place(*r, tools_only, canon::CanonicalizationPolicy::none());
        }
        auto a = canon::analyze_prompt(*parsed, model);
        auto b = canon::analyze_prompt(*chat_turn, model);
        ASSERT_TRUE(a && b);
        EXPECT_EQ(a->tokens.tokens, b->tokens.tokens) << s << "/" << t;
      }
    }
  }
}

TEST(WorkloadsTest, VolatileLosesItsPrefixAsSentAndCanonicalizationRecoversIt) {
  VolatileOptions o;
  o.requests = 20;
  o.system_len = 512;
  const Workload w = make_volatile(o, 1);
  const auto tokenizer = canon::make_byte_tokenizer();
  CeilingModel m;
  m.tokenizer = tokenizer.get();
  auto as_sent = compute_ceiling(w, m);
  m.policy = canon::CanonicalizationPolicy{};
  auto canonical = compute_ceiling(w, m);
  ASSERT_TRUE(as_sent.ok() && canonical.ok());
  EXPECT_LT(as_sent->hit_rate, 0.1);
  EXPECT_GT(canonical->hit_rate, 0.7);
}

TEST(RngTest, IsDeterministicAndUniformEnough) {
  Rng a(42), b(42);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(a.next(), b.next());
  Rng r(1);
  double sum = 0;
  for (int i = 0; i < 10000; ++i) sum += r.exponential(2.0);
  EXPECT_NEAR(sum / 10000, 2.0, 0.1);
  const std::string text = random_text(r, 1000);
  EXPECT_EQ(text.size(), 1000u);
}

}  // namespace
}  // namespace prefixgate::bench
