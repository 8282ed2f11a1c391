// The message memo: an earlier turn that the JSON parser hands back as the tree it built before
// is not converted into its Message again. Every request's messages are what parsing its body
// without any memo gives (every field, the index where the message now stands included), and
// the memo stays within its bounds.
#include "message_memo.h"

#include <gtest/gtest.h>

#include <cstddef>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "json_document_memo.h"
#include "json_element_memo.h"
#include "json_memo_parse.h"
#include "prefixgate/canonicalize/json.h"
#include "prefixgate/canonicalize/request.h"

namespace prefixgate::canon {
namespace {

using internal::MessageMemo;

class MessageMemoTest : public ::testing::Test {
 protected:
  void SetUp() override { clear(); }
  void TearDown() override { clear(); }
  static void clear() {
    MessageMemo::for_this_thread().clear();
    json::internal::ElementMemo::for_this_thread().clear();
    json::internal::DocumentMemo::for_this_thread().clear();
  }
};

// Messages of every shape parse_message reads, each long enough for the element memo.
std::string message_json(std::size_t kind, std::string_view tag) {
  const std::string text = json::memo_test::turn_text(tag, 160);
  switch (kind % 5) {
    case 0: return R"({"role":"user","content":")" + text + R"("})";
    case 1: return R"({"role":"system","name":"ops","content":")" + text + R"("})";
    case 2:
      return R"({"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function",)"
             R"("function":{"name":"read","arguments":"{\"path\":\")" +
             text + R"(\"}"}}]})";
    case 3: return R"({"role":"tool","tool_call_id":"c1","content":")" + text + R"("})";
    default:
      return R"({"role":"user","content":[{"type":"text","text":")" + text +
             R"("},{"type":"image_url","image_url":{"url":"https://x/a.png"}}]})";
  }
}

std::string chat_body(const std::vector<std::string>& messages) {
  std::string list;
  for (const std::string& m : messages) list += (list.empty() ? "" : ",") + m;
  return R"({"model":"m","messages":[)" + list + R"(],"max_tokens":1})";
}

// The request as the gateway parses it: with its members' bytes, which is where the parser keeps
// and shares the trees of tool lists and of a conversation's turns.
Result<ParsedRequest> parse_shared(const std::string& body) {
  std::vector<json::SourceMember> source;
  return parse_request(body, Endpoint::kChatCompletions, RequestLimits{}, source);
}

// The request as parsed without any memo: its body parsed plainly (no shared trees), then
// validated.
ParsedRequest plain_parse(const std::string& body) {
  auto value = json::parse(body);
  EXPECT_TRUE(value.ok()) << body;
  auto req = parse_request_value(std::move(*value), Endpoint::kChatCompletions);
  EXPECT_TRUE(req.ok()) << body;
  return std::move(*req);
}

void expect_same_messages(const ParsedRequest& got, const ParsedRequest& want) {
  ASSERT_EQ(got.messages.size(), want.messages.size());
  for (std::size_t i = 0; i < want.messages.size(); ++i) {
    const Message& a = got.messages[i];
    const Message& b = want.messages[i];
    EXPECT_EQ(a.index, b.index) << i;
    EXPECT_EQ(a.role, b.role) << i;
    EXPECT_EQ(a.content_is_string, b.content_is_string) << i;
    EXPECT_EQ(a.name, b.name) << i;
    EXPECT_EQ(a.tool_call_id, b.tool_call_id) << i;
    EXPECT_EQ(a.tool_calls, b.tool_calls) << i;
    ASSERT_EQ(a.parts.size(), b.parts.size()) << i;
    for (std::size_t p = 0; p < b.parts.size(); ++p) {
      EXPECT_EQ(a.parts[p].type, b.parts[p].type) << i << "/" << p;
      EXPECT_EQ(a.parts[p].text, b.parts[p].text) << i << "/" << p;
      EXPECT_EQ(a.parts[p].value, b.parts[p].value) << i << "/" << p;
    }
  }
}

// An agent's conversation, one turn longer each request: from the turns' second sighting on (when
// the parser keeps their trees), each earlier turn's message comes from the memo, and every
// request's messages are the plain parse's.
TEST_F(MessageMemoTest, AGrowingConversationsEarlierTurnsAreNotParsedAgain) {
  std::vector<std::string> conversation;
  for (std::size_t turn = 0; turn < 12; ++turn) {
    conversation.push_back(message_json(turn, "turn " + std::to_string(turn)));
    const std::string body = chat_body(conversation);
    auto req = parse_shared(body);
    ASSERT_TRUE(req.ok()) << req.error().message;
    expect_same_messages(*req, plain_parse(body));
    const json::Array& list = req->body.find("messages")->as_array();
    for (std::size_t i = 0; i < list.size(); ++i) {
      // Each tree the parser shares is in the memo once the request is parsed.
      if (list[i].is_shared()) {
        EXPECT_NE(MessageMemo::for_this_thread().find(list[i]), nullptr) << turn << "/" << i;
      }
    }
    // The turns before the last two were sighted twice at least: their trees are shared.
    for (std::size_t i = 0; i + 2 < list.size(); ++i) {
      EXPECT_TRUE(list[i].is_shared()) << turn << "/" << i;
    }
  }
  EXPECT_GE(MessageMemo::for_this_thread().entries(), 10u);
}

// A kept message found at another place (an agent that drops its oldest turns) takes the index
// where it now stands.
TEST_F(MessageMemoTest, AMessageFoundElsewhereTakesItsNewIndex) {
  std::vector<std::string> conversation;
  for (std::size_t turn = 0; turn < 8; ++turn) {
    conversation.push_back(message_json(turn, "window " + std::to_string(turn)));
  }
  for (int round = 0; round < 3; ++round) {
    ASSERT_TRUE(parse_shared(chat_body(conversation)).ok());
  }
  const std::size_t kept = MessageMemo::for_this_thread().entries();
  EXPECT_GE(kept, 8u);
  conversation.erase(conversation.begin(), conversation.begin() + 3);
  const std::string body = chat_body(conversation);
  auto req = parse_shared(body);
  ASSERT_TRUE(req.ok());
  expect_same_messages(*req, plain_parse(body));
  EXPECT_EQ(req->messages[0].index, 0u);
  EXPECT_EQ(MessageMemo::for_this_thread().entries(), kept);  // nothing new to keep
}

// Only shared trees are looked up or kept: a request's own tree is gone with it, and its address
// may be the next request's.
TEST_F(MessageMemoTest, OnlySharedTreesAreKept) {
  auto value = json::parse(message_json(0, "own"));
  ASSERT_TRUE(value.ok());
  Message m;
  m.role = Role::kUser;
  MessageMemo& memo = MessageMemo::for_this_thread();
  memo.keep(*value, m);
  EXPECT_EQ(memo.entries(), 0u);
  EXPECT_EQ(memo.find(*value), nullptr);
  const json::Value shared = json::Value::shared(std::make_shared<const json::Value>(*value));
  memo.keep(shared, m);
  EXPECT_EQ(memo.entries(), 1u);
  EXPECT_NE(memo.find(shared), nullptr);
  // Another reference to the same tree finds it; an equal tree elsewhere does not.
  EXPECT_NE(memo.find(json::Value(shared)), nullptr);
  EXPECT_EQ(memo.find(json::Value::shared(std::make_shared<const json::Value>(*value))), nullptr);
}

// Random conversations (turns of every shape, repeated, dropped and replaced) parse to the plain
// parse's messages, and the memo stays within its bounds.
TEST_F(MessageMemoTest, RandomConversationsParseAsWithoutTheMemo) {
  std::mt19937_64 rng(20261206);
  std::vector<std::string> conversation;
  for (int request = 0; request < 300; ++request) {
    const std::size_t action = rng() % 6;
    if (action == 0 && conversation.size() > 2) {
      conversation.erase(conversation.begin() + static_cast<std::ptrdiff_t>(rng() % 2));
    } else if (action == 1 && !conversation.empty()) {
      conversation.back() = message_json(rng(), "replaced " + std::to_string(rng() % 4));
    } else if (action == 2 && conversation.size() > 6) {
      conversation.resize(2);
    } else {
      conversation.push_back(message_json(rng(), "turn " + std::to_string(rng() % 16)));
    }
    const std::string body = chat_body(conversation);
    auto req = parse_shared(body);
    ASSERT_TRUE(req.ok()) << req.error().message;
    expect_same_messages(*req, plain_parse(body));
  }
  const MessageMemo& memo = MessageMemo::for_this_thread();
  EXPECT_GT(memo.entries(), 0u);
  EXPECT_LE(memo.entries(), MessageMemo::kMaxEntries);
  EXPECT_LE(memo.total_bytes(), MessageMemo::kMaxTotalBytes);
}

// Bounded by bytes: conversations of long turns, more than the memo may hold, leave it under
// kMaxTotalBytes with the latest turns kept; a message over a sixteenth of it is never kept.
TEST_F(MessageMemoTest, MemoryIsBoundedByEntriesAndBytes) {
  const std::size_t turn_bytes = 200 << 10;  // the element memo keeps trees up to 256 KiB
  std::vector<std::string> turns;
  for (int i = 0; i < 120; ++i) {
    turns.push_back(R"({"role":"user","content":")" +
                    json::memo_test::turn_text(std::to_string(i), turn_bytes) + R"("})");
  }
  for (const std::string& turn : turns) {
    // The parser notes a turn at its first sighting and keeps its tree at the second.
    for (int sighting = 0; sighting < 2; ++sighting) {
      ASSERT_TRUE(parse_shared(chat_body({turn})).ok());
    }
  }
  MessageMemo& memo = MessageMemo::for_this_thread();
  EXPECT_GT(memo.entries(), 0u);
  EXPECT_LE(memo.total_bytes(), MessageMemo::kMaxTotalBytes);
  EXPECT_LT(memo.entries() * turn_bytes, MessageMemo::kMaxTotalBytes);

  memo.clear();
  const std::string huge = R"({"role":"user","content":")" +
                           json::memo_test::turn_text("huge", MessageMemo::kMaxTotalBytes / 16) +
                           R"("})";
  const json::Value tree = json::Value::shared(std::make_shared<const json::Value>(
      *json::parse(huge, json::ParseLimits{.max_bytes = 64u << 20})));
  Message m;
  m.parts.push_back(ContentPart{"text", std::string(MessageMemo::kMaxTotalBytes / 16, 'x'), {}});
  memo.keep(tree, m);
  EXPECT_EQ(memo.entries(), 0u);
}

}  // namespace
}  // namespace prefixgate::canon
