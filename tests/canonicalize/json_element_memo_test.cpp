// json::parse's element memo: the object and array elements of root lists named as element keys
// (a conversation's messages) are built once per thread from their second sighting and then
// taken from the memo by their bytes. The tree, the member spans and every error are what parse()
// without the memo gives; a rule that rewrites a message rewrites its own copy.
#include "json_element_memo.h"

#include <gtest/gtest.h>

#include <array>
#include <cstddef>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "json_document_memo.h"
#include "json_memo_parse.h"
#include "prefixgate/canonicalize/anthropic.h"
#include "prefixgate/canonicalize/json.h"
#include "prefixgate/canonicalize/policy.h"
#include "prefixgate/canonicalize/request.h"
#include "prefixgate/canonicalize/responses_api.h"

namespace prefixgate::json {
namespace {

constexpr std::array<std::string_view, 2> kElementKeys = {"messages", "input"};

using ElementParse = memo_test::SpannedParse;

ElementParse parse_with_elements(std::string_view text, const ParseLimits& limits = {}) {
  return memo_test::parse_spanned(text, limits, MemoKeys{.elements = kElementKeys});
}

ElementParse parse_without_memo(std::string_view text, const ParseLimits& limits = {}) {
  return memo_test::parse_spanned(text, limits);
}

// A message long enough for the memo.
std::string long_message(std::string_view role, std::string_view tag, std::size_t bytes = 200) {
  std::string text(tag);
  while (text.size() < bytes) text += " the tool returns a line of the file";
  return R"({"role":")" + std::string(role) + R"(","content":")" + text + R"("})";
}

std::string conversation_body(const std::vector<std::string>& messages) {
  std::string list;
  for (const std::string& m : messages) list += (list.empty() ? "" : ",") + m;
  return R"({"model":"m","messages":[)" + list + R"(],"max_tokens":1})";
}

const Array& listed_messages(const ElementParse& p) {
  return p.doc->find("messages")->as_array();
}

// Checks the memo's parse against a plain one: same tree, same text written back, same spans,
// same error. Returns how many elements it took from (or kept in) the memo.
std::size_t expect_elements_as_plain(std::string_view text, const ParseLimits& limits = {}) {
  const ElementParse memo = parse_with_elements(text, limits);
  if (!memo_test::expect_same_parse(memo, parse_without_memo(text, limits), text)) return 0;
  std::size_t shared = 0;
  if (!memo.doc->is_object()) return 0;
  for (std::string_view key : kElementKeys) {
    const Value* list = memo.doc->find(key);
    if (list == nullptr || !list->is_array()) continue;
    for (const Value& element : list->as_array()) shared += element.is_shared() ? 1 : 0;
  }
  return shared;
}

class JsonElementMemoTest : public ::testing::Test {
 protected:
  // The document memo (json_document_memo.h) holds kept elements too: both start empty.
  void SetUp() override { clear(); }
  void TearDown() override { clear(); }
  static void clear() {
    internal::ElementMemo::for_this_thread().clear();
    internal::DocumentMemo::for_this_thread().clear();
  }
};

TEST_F(JsonElementMemoTest, AnElementIsKeptFromItsSecondSightingAndSharedFromThen) {
  const std::string system = long_message("system", "second sighting");
  const ElementParse first =
      parse_with_elements(conversation_body({system, long_message("user", "one")}));
  const ElementParse second =
      parse_with_elements(conversation_body({system, long_message("user", "two")}));
  const ElementParse third =
      parse_with_elements(conversation_body({system, long_message("user", "three")}));
  ASSERT_TRUE(first.doc.ok() && second.doc.ok() && third.doc.ok());
  EXPECT_FALSE(listed_messages(first)[0].is_shared());  // seen once: only its bytes noted
  EXPECT_TRUE(listed_messages(second)[0].is_shared());  // built, and kept
  EXPECT_TRUE(listed_messages(third)[0].is_shared());   // taken from the memo
  EXPECT_EQ(&listed_messages(second)[0].as_object(), &listed_messages(third)[0].as_object());
  EXPECT_EQ(listed_messages(third)[0], listed_messages(first)[0]);
  // The new last turn of each is its own.
  EXPECT_FALSE(listed_messages(third)[1].is_shared());
  EXPECT_EQ(listed_messages(third)[1], *parse_without_memo(long_message("user", "three")).doc);
  EXPECT_EQ(expect_elements_as_plain(conversation_body({system, long_message("user", "four")})),
            1u);
}

// What an agent sends: the conversation so far and one new turn, request after request. From
// its third request on, every earlier turn comes from the memo.
TEST_F(JsonElementMemoTest, AGrowingConversationBuildsOnlyItsNewTurns) {
  std::vector<std::string> conversation = {long_message("system", "agent")};
  for (int turn = 0; turn < 8; ++turn) {
    conversation.push_back(
        long_message(turn % 2 ? "assistant" : "user", "turn " + std::to_string(turn)));
    const std::size_t shared = expect_elements_as_plain(conversation_body(conversation));
    // The turns sent before were seen once at least: this second sighting keeps them (shared);
    // the new turn is only noted. The first request has nothing seen before.
    EXPECT_EQ(shared, turn == 0 ? 0 : conversation.size() - 1) << "turn " << turn;
  }
}

TEST_F(JsonElementMemoTest, OnlyContainerElementsOfSomeSizeInNamedRootListsAreShared) {
  const std::string big = long_message("user", "named");
  const std::string small = R"({"role":"user","content":"hi"})";
  const std::string nested = R"({"outer":{"messages":[)" + big + "]}}";
  const std::string other_key = R"({"history":[)" + big + "]}";
  const std::string strings = R"({"input":[")" + std::string(300, 'x') + R"("]})";
  const std::string input = R"({"input":[)" + big + "]}";
  for (int i = 0; i < 3; ++i) {
    EXPECT_FALSE(parse_with_elements(nested)
                     .doc->find("outer")
                     ->find("messages")
                     ->as_array()[0]
                     .is_shared());
    EXPECT_FALSE(parse_with_elements(other_key).doc->find("history")->as_array()[0].is_shared());
    EXPECT_FALSE(parse_with_elements(strings).doc->find("input")->as_array()[0].is_shared());
    EXPECT_FALSE(parse_with_elements(conversation_body({small}))
                     .doc->find("messages")
                     ->as_array()[0]
                     .is_shared());
    EXPECT_EQ(parse_with_elements(input).doc->find("input")->as_array()[0].is_shared(), i > 0);
  }
  // Without element keys nothing is taken from the memo, even what it holds.
  EXPECT_FALSE(listed_messages(parse_without_memo(conversation_body({big}))).front().is_shared());
}

// The memo's bytes must be the whole element: one that differs only after a kept one's first
// bytes, or only in its last, is another element.
TEST_F(JsonElementMemoTest, ADifferentByteAnywhereIsAnotherElement) {
  const std::string kept = long_message("user", "differs", 400);
  parse_with_elements(conversation_body({kept}));
  parse_with_elements(conversation_body({kept}));
  ASSERT_TRUE(listed_messages(parse_with_elements(conversation_body({kept})))[0].is_shared());
  std::string last_byte = kept;
  last_byte[last_byte.size() - 3] = 'X';
  std::string longer = kept;
  longer.insert(longer.size() - 1, R"(,"name":"extra")");
  std::string spaced = kept;
  spaced.insert(1, " ");
  std::string escaped = kept;
  escaped.replace(escaped.find("tool"), 4, "t\\u006fol");  // the same text once unescaped
  for (const std::string& other : {last_byte, longer, spaced, escaped}) {
    const ElementParse p = parse_with_elements(conversation_body({other}));
    ASSERT_TRUE(p.doc.ok()) << other;
    EXPECT_FALSE(listed_messages(p)[0].is_shared()) << other;
    expect_elements_as_plain(conversation_body({other}));
  }
  // Followed by other bytes than before (a longer list, whitespace), the same element still is.
  EXPECT_EQ(expect_elements_as_plain(conversation_body({kept, kept})), 2u);
  EXPECT_EQ(expect_elements_as_plain(R"({"messages":[  )" + kept + "\n ,\t" + kept + " ]}"), 2u);
}

TEST_F(JsonElementMemoTest, AChangeToASharedElementStaysInItsOwnDocument) {
  const std::string kept = long_message("user", "own copy");
  parse_with_elements(conversation_body({kept}));
  ElementParse a = parse_with_elements(conversation_body({kept}));
  const ElementParse b = parse_with_elements(conversation_body({kept}));
  ASSERT_TRUE(listed_messages(a)[0].is_shared() && listed_messages(b)[0].is_shared());
  const std::string before = to_json(listed_messages(b)[0]);
  a.doc->find("messages")->as_array()[0].find("content")->as_string() = "changed";
  EXPECT_EQ(to_json(listed_messages(b)[0]), before);
  EXPECT_EQ(to_json(listed_messages(parse_with_elements(conversation_body({kept})))[0]), before);
}

// An element kept under one depth limit is not taken under another, which may refuse it.
TEST_F(JsonElementMemoTest, ADepthLimitGetsItsOwnAnswer) {
  const std::string deep =
      R"({"role":"user","content":[{"type":"text","text":")" + std::string(200, 'd') + R"("}]})";
  const std::string text = conversation_body({deep});
  for (int i = 0; i < 3; ++i) expect_elements_as_plain(text);
  ParseLimits shallow;
  shallow.max_depth = 3;  // root, messages, the message: its content list is one too many
  EXPECT_EQ(expect_elements_as_plain(text, shallow), 0u);
  EXPECT_FALSE(parse_with_elements(text, shallow).doc.ok());
  EXPECT_TRUE(listed_messages(parse_with_elements(text))[0].is_shared());
}

TEST_F(JsonElementMemoTest, ErrorsAreTheParsersWhateverTheMemoHolds) {
  const std::string kept = long_message("user", "errors");
  parse_with_elements(conversation_body({kept}));
  parse_with_elements(conversation_body({kept}));
  const std::vector<std::string> bad = {
      R"({"messages":[)" + kept + "," + kept,                       // unterminated
      R"({"messages":[)" + kept + "," + kept + "]} x",              // trailing content
      R"({"messages":[)" + kept + R"(,{"a":1,"a":2}]})",            // a duplicate key after it
      R"({"messages":[)" + kept + R"(],"messages":[]})",            // a duplicate root key
      R"({"messages":[)" + kept + R"(,{"content":"\ud800"}]})",     // a lone surrogate
      R"({"messages":[)" + kept.substr(0, kept.size() - 1) + "]}",  // the kept one cut short
  };
  for (const std::string& text : bad) {
    EXPECT_FALSE(parse_with_elements(text).doc.ok()) << text;
    expect_elements_as_plain(text);
  }
}

TEST_F(JsonElementMemoTest, MemoryIsBoundedByEntriesAndBytes) {
  using Memo = internal::ElementMemo;
  Memo& memo = Memo::for_this_thread();
  // Many small distinct elements: bounded by the entry count.
  for (std::size_t i = 0; i < Memo::kMaxEntries + 300; ++i) {
    parse_with_elements(conversation_body({long_message("user", "small " + std::to_string(i))}));
    ASSERT_LE(memo.entries(), Memo::kMaxEntries);
  }
  EXPECT_EQ(memo.entries(), Memo::kMaxEntries);
  // Large distinct elements: bounded by their bytes.
  for (std::size_t i = 0; i < 80; ++i) {
    parse_with_elements(
        conversation_body({long_message("user", "large " + std::to_string(i), 200'000)}));
    ASSERT_LE(memo.total_bytes(), Memo::kMaxTotalBytes);
  }
  EXPECT_LT(memo.entries(), 80u);
  // Larger than an entry may be: never noted.
  const std::size_t before = memo.total_bytes();
  const std::string huge = conversation_body({long_message("user", "huge", Memo::kMaxBytes + 1)});
  for (int i = 0; i < 3; ++i) EXPECT_EQ(expect_elements_as_plain(huge), 0u);
  EXPECT_EQ(memo.total_bytes(), before);
  // Trees count as well as text: a list of numbers makes a tree many times its bytes.
  memo.clear();
  std::string numbers = R"({"role":"user","content":[)";
  while (numbers.size() < 100'000) numbers += "1,";
  numbers += "1]}";
  const std::string dense = R"({"messages":[)" + numbers + "]}";
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(expect_elements_as_plain(dense), 0u);  // its tree is over kMaxTreeBytes
  }
  EXPECT_LT(memo.total_bytes(), Memo::kMaxTreeBytes);
  const std::string kept = long_message("user", "counted", 20'000);
  for (int i = 0; i < 3; ++i) parse_with_elements(conversation_body({kept}));
  EXPECT_TRUE(listed_messages(parse_with_elements(conversation_body({kept})))[0].is_shared());
  EXPECT_GE(memo.total_bytes(), numbers.size() + 2 * kept.size());  // its text and its tree
  EXPECT_GT(internal::approx_tree_bytes(*parse_without_memo(numbers).doc), Memo::kMaxTreeBytes);
  // The least recently used goes first: a kept element used all along survives the churn.
  memo.clear();
  const std::string hot = long_message("system", "hot");
  for (std::size_t i = 0; i < Memo::kMaxEntries * 2; ++i) {
    parse_with_elements(
        conversation_body({hot, long_message("user", "churn " + std::to_string(i))}));
  }
  EXPECT_TRUE(listed_messages(parse_with_elements(conversation_body({hot})))[0].is_shared());
}

// Random conversations, sent as an agent sends them (growing, with an edited turn now and then,
// escapes and non-ASCII text, content as a string or as parts), against the plain parser.
TEST_F(JsonElementMemoTest, RandomConversationsParseAsWithoutTheMemo) {
  std::mt19937 rng(20261205);
  const std::array<std::string_view, 8> pieces = {
      "word ",  "\\n", "\\\"quoted\\\" ", "\\u00e9t\\u00e9 ", "日本語 ", "\\ud83d\\ude00 ",
      "tab\\t", "x"};
  const auto text = [&](std::size_t bytes) {
    std::string t;
    while (t.size() < bytes) t += pieces[rng() % pieces.size()];
    return t;
  };
  const auto random_message = [&] {
    const std::string role = rng() % 2 ? "user" : "assistant";
    if (rng() % 3 == 0) {
      return R"({"role":")" + role + R"(","content":[{"type":"text","text":")" + text(rng() % 400) +
             R"("},{"type":"text","text":")" + text(rng() % 100) + R"("}]})";
    }
    return R"({"role":")" + role + R"(","content":")" + text(rng() % 600) + R"("})";
  };
  std::size_t shared = 0;
  for (int conversation = 0; conversation < 20; ++conversation) {
    std::vector<std::string> messages = {random_message()};
    for (int turn = 0; turn < 12; ++turn) {
      messages.push_back(random_message());
      if (rng() % 5 == 0) messages[rng() % messages.size()] = random_message();
      shared += expect_elements_as_plain(conversation_body(messages));
    }
  }
  EXPECT_GT(shared, 500u);  // the memo was in play
}

// The request parsers of all three APIs take their conversations through the memo: Chat
// Completions' and Anthropic Messages' `messages`, the Responses `input`.
TEST_F(JsonElementMemoTest, EveryApisConversationIsKept) {
  const std::string user = long_message("user", "every api");
  const std::string chat = conversation_body({user, long_message("assistant", "chat")});
  const std::string messages = R"({"model":"m","max_tokens":8,"messages":[)" + user + "," +
                               long_message("assistant", "messages") + "]}";
  const std::string responses = R"({"model":"m","input":[)" + user + "]}";
  std::vector<SourceMember> source;
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(canon::parse_request(chat, canon::Endpoint::kChatCompletions, {}, source));
    ASSERT_TRUE(canon::parse_messages_request(messages, {}, source));
    ASSERT_TRUE(canon::parse_responses_request(responses, {}, source));
  }
  const auto c = canon::parse_request(chat, canon::Endpoint::kChatCompletions, {}, source);
  const auto m = canon::parse_messages_request(messages, {}, source);
  const auto r = canon::parse_responses_request(responses, {}, source);
  ASSERT_TRUE(c.ok() && m.ok() && r.ok());
  // The first message's bytes are the same in all three: one kept tree.
  const Value& from_chat = c->body.find("messages")->as_array()[0];
  const Value& from_messages = m->body.find("messages")->as_array()[0];
  const Value& from_responses = r->body.find("input")->as_array()[0];
  for (const Value* v : {&from_chat, &from_messages, &from_responses}) EXPECT_TRUE(v->is_shared());
  EXPECT_EQ(&from_chat.as_object(), &from_messages.as_object());
  EXPECT_EQ(&from_chat.as_object(), &from_responses.as_object());
  EXPECT_TRUE(m->body.find("messages")->as_array()[1].is_shared());
  EXPECT_EQ(m->chat.body.find("messages")->as_array()[0].find("content")->as_string(),
            from_messages.find("content")->as_string());
}

// The canonicalizer reads a shared message and copies it only to rewrite it.
TEST_F(JsonElementMemoTest, RulesCopyASharedMessageOnlyToRewriteIt) {
  const std::string stamped = R"({"role":"system","content":"It is 2026-12-05T10:37:12Z. )" +
                              std::string(200, 's') + R"("})";
  const std::string body = conversation_body({stamped, long_message("user", "question")});
  std::vector<SourceMember> source;
  for (int i = 0; i < 2; ++i)
    ASSERT_TRUE(canon::parse_request(body, canon::Endpoint::kChatCompletions, {}, source));

  // Observed: reported, not made; the message stays shared.
  auto observed = canon::parse_request(body, canon::Endpoint::kChatCompletions, {}, source);
  ASSERT_TRUE(observed.ok());
  auto changes = canon::canonicalize_in_place(*observed, canon::CanonicalizationPolicy::none(),
                                              canon::CanonicalizationPolicy{}, source);
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_FALSE(changes[0].applied);
  EXPECT_TRUE(observed->body.find("messages")->as_array()[0].is_shared());

  // Rewritten: this request's copy changes, the memo's and the next request's do not.
  auto rewritten = canon::parse_request(body, canon::Endpoint::kChatCompletions, {}, source);
  ASSERT_TRUE(rewritten.ok());
  changes = canon::canonicalize_in_place(*rewritten, canon::CanonicalizationPolicy{},
                                         canon::CanonicalizationPolicy::none(), source);
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_TRUE(changes[0].applied);
  const Value& system = rewritten->body.find("messages")->as_array()[0];
  EXPECT_FALSE(system.is_shared());
  EXPECT_NE(system.find("content")->as_string().find("2026-12-05T10:00:00Z"), std::string::npos);
  EXPECT_EQ(rewritten->messages[0].text(), system.find("content")->as_string());
  auto next = canon::parse_request(body, canon::Endpoint::kChatCompletions, {}, source);
  ASSERT_TRUE(next.ok());
  const Value& again = next->body.find("messages")->as_array()[0];
  EXPECT_TRUE(again.is_shared());
  EXPECT_NE(again.find("content")->as_string().find("10:37:12"), std::string::npos);
}

}  // namespace
}  // namespace prefixgate::json
