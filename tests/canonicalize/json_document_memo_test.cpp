// json::parse's document memo: a request body that shares its bytes, up to a ',' between two
// elements of its message list, with a body the thread parsed lately is parsed from that ','
// on. The tree, the member spans and every error are what parse() without memos gives, whatever
// comes after the shared part (more turns, an edited turn, a repeated key, bytes that are not
// UTF-8, nesting too deep, a trailing comma); bodies parsed under other limits or memo keys are
// never taken for each other; what a body remembers is bounded.
#include "json_document_memo.h"

#include <gtest/gtest.h>

#include <array>
#include <cstddef>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "json_element_memo.h"
#include "json_memo_parse.h"
#include "prefixgate/canonicalize/json.h"

namespace prefixgate::json {
namespace document_memo_test {

constexpr std::array<std::string_view, 2> kElements = {"messages", "input"};
constexpr std::array<std::string_view, 2> kShared = {"tools", "functions"};
const MemoKeys kKeys{.shared = kShared, .elements = kElements};

internal::DocumentMemo& memo() {
  return internal::DocumentMemo::for_this_thread();
}

// Parses through the memos and without, expects the same, and returns the memo's parse.
memo_test::SpannedParse parse_both(std::string_view text, const ParseLimits& limits = {},
                                   const MemoKeys& keys = kKeys) {
  memo_test::SpannedParse with = memo_test::parse_spanned(text, limits, keys);
  memo_test::expect_same_parse(with, memo_test::parse_spanned(text, limits), text);
  return with;
}

std::string message(std::string_view role, const std::string& text) {
  return R"({"role":")" + std::string(role) + R"(","content":")" + text + R"("})";
}

std::string turn_text(int turn) {
  std::string text = "turn " + std::to_string(turn);
  while (text.size() < 300) text += " the tool returns a line of the file";
  return text;
}

std::string body(const std::vector<std::string>& messages, std::string_view before = "",
                 std::string_view after = R"(,"max_tokens":64)") {
  std::string list;
  for (const std::string& m : messages) list += (list.empty() ? "" : ",") + m;
  return R"({"model":"m")" + std::string(before) + R"(,"messages":[)" + list + "]" +
         std::string(after) + "}";
}

class JsonDocumentMemoTest : public ::testing::Test {
 protected:
  void SetUp() override { clear(); }
  void TearDown() override { clear(); }
  static void clear() {
    memo().clear();
    internal::ElementMemo::for_this_thread().clear();
  }
};

TEST_F(JsonDocumentMemoTest, AGrowingConversationIsParsedFromItsLastSharedTurn) {
  std::vector<std::string> turns = {message("system", turn_text(-1))};
  for (int turn = 0; turn < 10; ++turn) {
    turns.push_back(message(turn % 2 ? "assistant" : "user", turn_text(turn)));
    const auto parsed = parse_both(body(turns, "", R"(,"tools":[{"type":"function"}])"));
    ASSERT_TRUE(parsed.doc.ok());
  }
  // The first two bodies are parsed whole (the second keeps the turns it sees again); from the
  // third on each is taken from the one before up to its last ','.
  EXPECT_EQ(memo().resumes(), 8u);
  // The turns taken from the memo are the element memo's trees, not copies.
  const auto a = parse_both(body(turns));
  const auto b = parse_both(body(turns));
  EXPECT_EQ(&a.doc->find("messages")->as_array()[3].as_object(),
            &b.doc->find("messages")->as_array()[3].as_object());
}

TEST_F(JsonDocumentMemoTest, WhatFollowsTheSharedPartGivesThePlainParsersErrors) {
  std::vector<std::string> turns = {message("system", turn_text(-1)), message("user", turn_text(0)),
                                    message("assistant", turn_text(1))};
  const std::string two = body(turns);
  parse_both(two);
  parse_both(two);
  const std::string start = R"({"model":"m","messages":[)" + turns[0] + "," + turns[1] + ",";
  const std::vector<std::string> bad = {
      start + turns[2] + ",]}",                                    // a trailing comma
      start + "]}",                                                // a comma before the end
      start + turns[2] + R"(],"model":"n"})",                      // a key before the list again
      start + turns[2] + R"(],"messages":[]})",                    // the list's key again
      start + turns[2] + R"(,{"a":1,"a":2}]})",                    // a repeated key in a turn
      start + R"({"role":"user","content":"\ud800"}]})",           // a lone surrogate
      start + "{\"role\":\"user\",\"content\":\"\xC3\x28\"}]}",    // not UTF-8
      start + std::string(80, '[') + std::string(80, ']') + "]}",  // nesting too deep
      start + turns[2] + "]} x",                                   // trailing content
      start + turns[2],                                            // unterminated
      start + R"({"n":1e400}]})",                                  // a number too large
      start + turns[2] + R"(],"max_tokens":64} )",                 // fine, trailing space
      start + turns[2] + R"( , )" + turns[2] + R"( ] , "stream" : true })",  // fine, spaced
  };
  for (const std::string& text : bad) {
    const std::size_t before = memo().resumes();
    parse_both(text);
    if (::testing::Test::HasFailure()) return;
    // Each of them was parsed from the remembered body on, or tried to be.
    EXPECT_LE(memo().resumes(), before + 1);
  }
  EXPECT_GE(memo().resumes(), 2u);
}

// A chat's tools after its messages: the next turn is parsed only between the shared ',' and the
// list's ']', the members after the list taken as they were; bodies that end as the remembered
// one does but differ between (the list closed early, a key again, an open string) are parsed
// as the plain parser parses them.
TEST_F(JsonDocumentMemoTest, MembersAfterTheListAreTakenWhenTheBodyEndsAsTheRememberedOne) {
  const std::string after =
      R"(,"tools":[{"type":"function","function":{"name":"read_file","description":"Reads a )"
      R"(file","parameters":{"type":"object"}}}],"max_tokens":64)";
  std::vector<std::string> turns = {message("system", turn_text(-1)), message("user", "hi")};
  for (int i = 0; i < 3; ++i) parse_both(body(turns, "", after));  // the tools kept from here
  const std::size_t tails = memo().tail_resumes();
  turns.back() = message("user", "what is in main.cpp?");
  const auto next = parse_both(body(turns, "", after));
  ASSERT_TRUE(next.doc.ok());
  EXPECT_EQ(memo().tail_resumes(), tails + 1);
  EXPECT_TRUE(next.doc->find("tools")->is_shared());
  // The body is remembered with its tail: the turn after it is taken the same way.
  turns.push_back(message("assistant", turn_text(1)));
  parse_both(body(turns, "", after));
  EXPECT_EQ(memo().tail_resumes(), tails + 2);
  // Another tail: parsed after the list as usual.
  parse_both(body(turns, "", R"(,"max_tokens":32)"));
  EXPECT_EQ(memo().tail_resumes(), tails + 2);

  parse_both(body(turns, "", after));
  parse_both(body(turns, "", after));
  const std::string start = R"({"model":"m","messages":[)" + turns[0] + "," + turns[1] + ",";
  const std::string end = "]" + after + "}";
  const std::vector<std::string> tricky = {
      start + turns[2] + R"(],"x":[1)" + end,              // the list closed in between
      start + turns[2] + R"(],"tools":[1)" + end,          // the tools' key twice
      start + turns[2] + R"(],"messages":[1)" + end,       // the list's key twice
      start + R"({"role":"user","content":"open)" + end,   // a string left open
      start + end,                                         // nothing between: a trailing ','
      start + "[1" + end,                                  // an array left open
      start + turns[2] + " , " + turns[2] + " \n " + end,  // fine, spaced
      start + turns[2] + end + " ",                        // fine, trailing space
  };
  for (const std::string& text : tricky) {
    parse_both(text);
    if (::testing::Test::HasFailure()) return;
  }
}

TEST_F(JsonDocumentMemoTest, BodiesUnderOtherLimitsOrKeysAreNotTakenForEachOther) {
  std::vector<std::string> turns = {message("system", turn_text(-1)),
                                    message("user", turn_text(0))};
  for (int i = 0; i < 3; ++i) parse_both(body(turns));
  const std::size_t resumes = memo().resumes();
  turns.push_back(message("assistant", turn_text(1)));
  const std::string next = body(turns);
  parse_both(next, ParseLimits{.max_depth = 3});  // too shallow for its turns: an error
  parse_both(next, ParseLimits{.max_depth = 10});
  const std::array<std::string_view, 1> only_messages = {"messages"};
  parse_both(next, {}, MemoKeys{.shared = {}, .elements = only_messages});
  EXPECT_EQ(memo().resumes(), resumes);
  parse_both(next);
  EXPECT_EQ(memo().resumes(), resumes + 1);
}

TEST_F(JsonDocumentMemoTest, OnlyWhatTheOtherMemosKeepOrSmallValuesAreRemembered) {
  using Memo = internal::DocumentMemo;
  // Seen once, a turn is only noted by the element memo: nothing to remember yet.
  std::vector<std::string> turns = {message("system", turn_text(-1)),
                                    message("user", turn_text(0))};
  parse_both(body(turns));
  EXPECT_FALSE(memo().find(body(turns) + " ", 64, internal::memo_keys_hash(kKeys)));
  // Small turns the element memo never keeps are remembered as they are.
  const std::vector<std::string> small = {message("user", "hi"), message("assistant", "hello")};
  parse_both(body(small));
  const auto resume = memo().find(body(small), 64, internal::memo_keys_hash(kKeys));
  ASSERT_TRUE(resume);
  EXPECT_EQ(resume->elements, 1u);
  // A tool list before the messages: remembered once the subtree memo keeps it.
  const std::string tools =
      R"(,"tools":[{"type":"function","function":{"name":"read_file","description":"Reads a file"}}])";
  const std::string with_tools = body(small, tools);
  parse_both(with_tools);
  EXPECT_FALSE(memo().find(with_tools, 64, internal::memo_keys_hash(kKeys)));
  parse_both(with_tools);
  const auto after_tools = memo().find(with_tools, 64, internal::memo_keys_hash(kKeys));
  ASSERT_TRUE(after_tools);
  EXPECT_TRUE(after_tools->entry->head[1].value.is_shared());
  // A body over the bound is not remembered.
  std::vector<std::string> huge(2, message("user", std::string(Memo::kMaxTextBytes / 2, 'x')));
  for (int i = 0; i < 3; ++i) parse_both(body(huge));
  EXPECT_FALSE(memo().find(body(huge), 64, internal::memo_keys_hash(kKeys)));
}

// Random bodies as agents send them, three conversations in turns: members before and after the
// list in varying order, turns small and large, grown, cut, edited anywhere, the same body again,
// whitespace around the list's commas; each parsed as the plain parser parses it.
TEST_F(JsonDocumentMemoTest, RandomConversationsParseAsThePlainParser) {
  std::mt19937 rng(20261205);
  const std::array<std::string, 6> heads = {
      R"("model":"m")",
      R"("max_tokens":64)",
      R"("temperature":0.5)",
      R"("tools":[{"type":"function","function":{"name":"grep","parameters":{}}}])",
      R"("metadata":{"user":"dev-7","tags":["a","b"]})",
      R"("stream":true)"};
  const std::array<std::string, 4> separators = {",", " , ", ",\n  ", "\t,"};
  const auto random_turn = [&](int i) {
    std::string text = "t" + std::to_string(i) + (rng() % 3 == 0 ? " \\u00e9\\n" : "");
    if (rng() % 2) text += turn_text(i);
    return message(rng() % 2 ? "user" : "assistant", text);
  };
  struct Conversation {
    std::vector<std::string> head;
    std::vector<std::string> tail;
    std::vector<std::string> turns;
    std::string separator;
  };
  std::array<Conversation, 3> conversations;
  for (Conversation& c : conversations) {
    for (const std::string& h : heads) (rng() % 2 ? c.head : c.tail).push_back(h);
    c.separator = separators[rng() % separators.size()];
  }
  int serial = 0;
  for (int step = 0; step < 300; ++step) {
    Conversation& c = conversations[rng() % conversations.size()];
    switch (rng() % 6) {
      case 0:  // cut short
        c.turns.resize(c.turns.size() / 2);
        break;
      case 1:  // an earlier turn edited
        if (!c.turns.empty()) c.turns[rng() % c.turns.size()] = random_turn(serial++);
        break;
      case 2:  // sent again
        break;
      default:  // one turn longer
        c.turns.push_back(random_turn(serial++));
        break;
    }
    std::string text = "{";
    for (const std::string& h : c.head) text += h + ",";
    text += R"("messages":[)";
    for (std::size_t i = 0; i < c.turns.size(); ++i) {
      text += (i > 0 ? c.separator : "") + c.turns[i];
    }
    text += "]";
    for (const std::string& t : c.tail) text += "," + t;
    text += "}";
    parse_both(text);
    if (::testing::Test::HasFailure()) {
      ADD_FAILURE() << "step " << step;
      return;
    }
  }
  EXPECT_GT(memo().resumes(), 50u);
  EXPECT_GT(memo().tail_resumes(), 10u);
}

}  // namespace document_memo_test
}  // namespace prefixgate::json
