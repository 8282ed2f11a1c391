// A tool list canonicalized through the thread's memo (canonicalize_in_place given the client's
// bytes) comes out exactly as without it: body, reports, parsed tools, and the rendered prompt,
// on the first sight of its bytes and on every repeat, under whichever rules apply.
#include "tool_list_memo.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "prefixgate/canonicalize/policy.h"
#include "prefixgate/canonicalize/render.h"

namespace prefixgate::canon {
namespace {

struct Prepared {
  ParsedRequest request;
  std::vector<Change> changes;
};

Prepared prepare(const std::string& body, const CanonicalizationPolicy& rewrite,
                 const CanonicalizationPolicy& observe, bool with_source) {
  std::vector<json::SourceMember> source;
  auto parsed = parse_request(body, Endpoint::kChatCompletions, {}, source);
  EXPECT_TRUE(parsed) << parsed.error().message << "\n" << body;
  Prepared p{parsed ? std::move(*parsed) : ParsedRequest{}, {}};
  p.changes = with_source ? canonicalize_in_place(p.request, rewrite, observe, source)
                          : canonicalize_in_place(p.request, rewrite, observe);
  return p;
}

std::string describe(const std::vector<Change>& changes) {
  std::string out;
  for (const Change& c : changes) {
    out += c.rule + " " + c.path + " " + c.detail + (c.applied ? " applied\n" : " observed\n");
  }
  return out;
}

void expect_same(const Prepared& memo, const Prepared& plain, const std::string& body) {
  SCOPED_TRACE(body);
  EXPECT_EQ(json::to_json(memo.request.body), json::to_json(plain.request.body));
  EXPECT_EQ(describe(memo.changes), describe(plain.changes));
  ASSERT_EQ(memo.request.tools.size(), plain.request.tools.size());
  for (std::size_t i = 0; i < memo.request.tools.size(); ++i) {
    EXPECT_EQ(memo.request.tools[i].name, plain.request.tools[i].name);
    EXPECT_EQ(memo.request.tools[i].path, plain.request.tools[i].path);
  }
  for (ChatTemplate t : {ChatTemplate::kLlama3, ChatTemplate::kChatml, ChatTemplate::kPlain}) {
    EXPECT_EQ(render_prompt(memo.request, t).text, render_prompt(plain.request, t).text);
  }
  // Each list's text is the body's list, and each item its definition, as the writer makes them.
  for (std::string_view key : {"tools", "functions"}) {
    const json::Value* list = memo.request.body.find(key);
    const ToolListText* text = tool_list_text(memo.request, key);
    if (list == nullptr) {
      EXPECT_EQ(text, nullptr);
      continue;
    }
    ASSERT_NE(text, nullptr) << key;
    EXPECT_EQ(text->json, json::to_json(*list));
    ASSERT_EQ(text->items.size(), list->as_array().size());
    for (std::size_t i = 0; i < text->items.size(); ++i) {
      EXPECT_EQ(text->item(i), json::to_json(list->as_array()[i]));
    }
  }
}

// A random tool definition: keys in random order, numbers in several spellings, sometimes a
// timestamp in a description, sometimes a custom tool without a function.
std::string random_tool(std::mt19937& rng) {
  static const char* kNames[] = {"search", "add", "fetch", "zeta", "alpha", "run"};
  static const char* kDescriptions[] = {"Looks things up.", "As of 2026-08-20T14:33:07Z.",
                                        "Cache epoch 1787236387 seconds", "Plain text \\n"};
  static const char* kNumbers[] = {"1", "1.0", "1e2", "2.50", "-0", "100000000000000000000"};
  const std::string name = kNames[rng() % 6];
  if (rng() % 6 == 0) return R"({"type":"custom","name":")" + name + R"("})";
  std::vector<std::string> props = {
      R"("q":{"type":"string"})",
      std::string(R"("n":{"type":"number","minimum":)") + kNumbers[rng() % 6] + "}",
      R"("d":{"description":")" + std::string(kDescriptions[rng() % 4]) + R"("})"};
  std::shuffle(props.begin(), props.end(), rng);
  std::string params = R"({"properties":{)";
  for (std::size_t i = 0; i < props.size(); ++i) params += (i ? "," : "") + props[i];
  params += R"(},"type":"object"})";
  std::vector<std::string> fn = {
      R"("name":")" + name + "\"",
      R"("description":")" + std::string(kDescriptions[rng() % 4]) + "\"",
      R"("parameters":)" + params};
  std::shuffle(fn.begin(), fn.end(), rng);
  std::string f = "{";
  for (std::size_t i = 0; i < fn.size(); ++i) f += (i ? ", " : "") + fn[i];
  f += "}";
  return rng() % 2 ? R"({"type":"function","function":)" + f + "}"
                   : R"({"function":)" + f + R"(,"type":"function"})";
}

std::string random_body(std::mt19937& rng) {
  std::string tools = "[";
  const std::size_t n = 1 + rng() % 5;
  for (std::size_t i = 0; i < n; ++i) tools += (i ? " , " : "") + random_tool(rng);
  tools += "]";
  std::string body = R"({"messages":[{"role":"system","content":"Be brief."},)"
                     R"({"role":"user","content":"hi"}],"tools":)" +
                     tools;
  if (rng() % 4 == 0)
    body += R"(,"functions":[{"name":"g2"},{"name":"g1","parameters":{"b":1,"a":2}}])";
  return body + "}";
}

CanonicalizationPolicy random_policy(std::mt19937& rng) {
  CanonicalizationPolicy p = CanonicalizationPolicy::none();
  p.tool_json = rng() % 2;
  p.tool_order = rng() % 2;
  p.timestamp = rng() % 2;
  p.timestamp_granularity = std::chrono::seconds(rng() % 2 ? 3600 : 60);
  return p;
}

TEST(ToolListMemoTest, RepeatedListsUnderEveryRuleModeComeOutAsWithoutTheMemo) {
  std::mt19937 rng(11);
  // Few bodies and few rule sets, drawn again and again, so most passes hit the memo and some
  // hit an entry made under other rules.
  std::vector<std::string> bodies;
  for (int i = 0; i < 6; ++i) bodies.push_back(random_body(rng));
  std::vector<std::pair<CanonicalizationPolicy, CanonicalizationPolicy>> rules;
  for (int i = 0; i < 4; ++i) rules.emplace_back(random_policy(rng), random_policy(rng));
  rules.emplace_back(CanonicalizationPolicy{}, CanonicalizationPolicy::none());
  rules.emplace_back(CanonicalizationPolicy::none(), CanonicalizationPolicy{});
  for (int i = 0; i < 400; ++i) {
    const std::string& body = bodies[rng() % bodies.size()];
    const auto& [rewrite, observe] = rules[rng() % rules.size()];
    expect_same(prepare(body, rewrite, observe, true), prepare(body, rewrite, observe, false),
                body);
    if (HasFailure()) return;
  }
}

TEST(ToolListMemoTest, TheSecondSightOfAListIsTakenFromTheMemo) {
  std::mt19937 rng(3);
  const std::string body = random_body(rng);
  std::shared_ptr<const ToolListText> first;
  // A fresh thread: its memo has not seen the list.
  std::thread([&] { first = prepare(body, {}, {}, true).request.tool_texts.at(0); }).join();
  const Prepared a = prepare(body, {}, {}, true);
  const Prepared b = prepare(body, {}, {}, true);
  EXPECT_NE(a.request.tool_texts.at(0), first);  // this thread made its own
  EXPECT_EQ(b.request.tool_texts.at(0), a.request.tool_texts.at(0));
  EXPECT_EQ(first->json, a.request.tool_texts.at(0)->json);
  // One byte more (a space inside the list) is another list.
  std::string spaced = body;
  spaced.insert(spaced.find("\"tools\":[") + 9, " ");
  EXPECT_NE(prepare(spaced, {}, {}, true).request.tool_texts.at(0), a.request.tool_texts.at(0));
}

// A list the rules rewrote is kept once and shared by every request that sends its bytes: no
// copy per request, and a request that modifies its body's list modifies its own copy.
TEST(ToolListMemoTest, ARewrittenListIsSharedAndARequestsChangesStayItsOwn) {
  // Members out of RFC 8785 order, so tool-json rewrites the list.
  const std::string body =
      R"({"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function",)"
      R"("function":{"parameters":{"type":"object"},"name":"zeta"}}]})";
  Prepared a = prepare(body, {}, {}, true);
  Prepared b = prepare(body, {}, {}, true);
  const json::Value* list_a = a.request.body.find("tools");
  const json::Value* list_b = b.request.body.find("tools");
  ASSERT_TRUE(list_a != nullptr && list_b != nullptr);
  EXPECT_TRUE(list_a->is_shared());
  EXPECT_TRUE(list_b->is_shared());
  EXPECT_EQ(&list_a->as_array(), &list_b->as_array());
  const std::string canonical = json::to_json(*list_a);
  EXPECT_EQ(canonical,
            R"([{"function":{"name":"zeta","parameters":{"type":"object"}},"type":"function"}])");
  b.request.body.find("tools")->as_array().clear();
  EXPECT_EQ(json::to_json(*a.request.body.find("tools")), canonical);
  const Prepared c = prepare(body, {}, {}, true);
  EXPECT_EQ(json::to_json(*c.request.body.find("tools")), canonical);
}

// A converted request's tools are its conversion of the client's bytes: the same bytes sent as a
// chat request's tools and as a Messages request's make two lists, and neither is taken for the
// other.
TEST(ToolListMemoTest, TheSameBytesThroughAnotherApiAreAnotherList) {
  const std::string client_tools = R"([{"name":"b","input_schema":{"type":"object"}}])";
  const std::vector<json::SourceMember> source = {{"tools", client_tools}};
  const std::string chat =
      R"({"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function",)"
      R"("function":{"name":"b"}},{"type":"function","function":{"name":"a"}}]})";
  const std::string converted =
      R"({"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function",)"
      R"("function":{"name":"b","parameters":{"type":"object"}}}]})";
  const auto run = [&](const std::string& body, std::optional<SourceShape> shape) {
    auto parsed = parse_request(body, Endpoint::kChatCompletions);
    EXPECT_TRUE(parsed);
    const CanonicalizationPolicy rewrite, observe = CanonicalizationPolicy::none();
    if (shape) {
      canonicalize_in_place(*parsed, rewrite, observe, source, *shape);
    } else {
      canonicalize_in_place(*parsed, rewrite, observe);
    }
    return json::to_json(*parsed->body.find("tools"));
  };
  const std::string as_chat = run(chat, SourceShape::kChat);
  const std::string as_messages = run(converted, SourceShape::kMessages);
  EXPECT_EQ(as_chat, run(chat, std::nullopt));
  EXPECT_EQ(as_messages, run(converted, std::nullopt));
  EXPECT_NE(as_messages, as_chat);
  EXPECT_EQ(run(chat, SourceShape::kChat), as_chat);
  EXPECT_EQ(run(converted, SourceShape::kResponses), as_messages);  // computed again, equal
}

TEST(ToolListMemoTest, KeepsTheMostRecentListsUpToItsSize) {
  internal::ToolListMemo memo;
  internal::ToolListOutcome o;
  o.reordered = true;
  for (std::size_t i = 0; i <= internal::ToolListMemo::kEntries; ++i) {
    memo.remember("list " + std::to_string(i), 7, o);
  }
  EXPECT_EQ(memo.find("list 0", 7), nullptr);  // the oldest went
  for (std::size_t i = 1; i <= internal::ToolListMemo::kEntries; ++i) {
    EXPECT_NE(memo.find("list " + std::to_string(i), 7), nullptr) << i;
  }
  EXPECT_EQ(memo.find("list 1", 8), nullptr);  // other rules
  memo.remember(std::string(internal::kToolListMemoMaxBytes + 1, '['), 7, o);
  EXPECT_NE(memo.find("list 1", 7), nullptr);  // too large: nothing evicted for it
}

}  // namespace
}  // namespace prefixgate::canon
