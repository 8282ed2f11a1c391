// The converted-turn memo: an Anthropic Messages turn that the JSON parser hands back as the tree
// it built before is not converted into its chat messages again; they are added again, shared.
// Every request's chat conversion (body, each message's origin, breakpoints) is what converting
// its body without any memo gives, and the chat request parsed from it the same.
#include <gtest/gtest.h>

#include <cstddef>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "conversion_builder.h"
#include "json_document_memo.h"
#include "json_element_memo.h"
#include "json_memo_parse.h"
#include "message_memo.h"
#include "prefixgate/canonicalize/anthropic.h"
#include "prefixgate/canonicalize/chat_conversion.h"
#include "prefixgate/canonicalize/json.h"
#include "prefixgate/canonicalize/request.h"
#include "prefixgate/canonicalize/responses_api.h"

namespace prefixgate::canon {
namespace {

using internal::ConvertedTurnMemo;

class ConvertedTurnMemoTest : public ::testing::Test {
 protected:
  void SetUp() override { clear(); }
  void TearDown() override { clear(); }
  static void clear() {
    ConvertedTurnMemo::for_this_thread().clear();
    internal::MessageMemo::for_this_thread().clear();
    json::internal::ElementMemo::for_this_thread().clear();
    json::internal::DocumentMemo::for_this_thread().clear();
  }
};

// Anthropic turns of every shape the converter takes, each long enough for the element memo;
// `marked` puts a cache_control on a block (a breakpoint: such a turn is converted each time).
std::string turn_json(std::size_t kind, std::string_view tag, bool marked) {
  const std::string text = json::memo_test::turn_text(tag, 160);
  const std::string mark = marked ? R"(,"cache_control":{"type":"ephemeral"})" : "";
  switch (kind % 6) {
    case 0: return R"({"role":"user","content":")" + text + R"("})";
    case 1: return R"({"role":"assistant","content":")" + text + R"("})";
    case 2:
      return R"({"role":"user","content":[{"type":"text","text":")" + text + R"(")" + mark +
             R"(},{"type":"text","text":"and more"}]})";
    case 3:
      return R"({"role":"assistant","content":[{"type":"text","text":")" + text +
             R"("},{"type":"tool_use","id":"toolu_)" + std::string(tag.substr(0, 1)) +
             R"(","name":"grep","input":{"pattern":")" + text + R"("})" + mark + "}]}";
    case 4:
      return R"({"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1",)"
             R"("content":")" +
             text + R"(")" + mark + R"(},{"type":"text","text":"Go on."}]})";
    default:
      return R"({"role":"user","content":[{"type":"image","source":{"type":"url",)"
             R"("url":"https://x/a.png"}},{"type":"text","text":")" +
             text + R"("}]})";
  }
}

std::string messages_body(const std::vector<std::string>& turns) {
  std::string list;
  for (const std::string& t : turns) list += (list.empty() ? "" : ",") + t;
  return R"({"model":"m","max_tokens":8,"system":"You are terse.",)"
         R"("tools":[{"name":"grep","description":"search","input_schema":{"type":"object"}}],)"
         R"("messages":[)" +
         list + "]}";
}

// As the gateway parses it: with its members' bytes, where the parser shares its turns' trees.
Result<MessagesRequest> parse_shared(const std::string& body) {
  std::vector<json::SourceMember> source;
  return parse_messages_request(body, RequestLimits{}, source);
}

std::vector<std::string> origin_lines(const ChatConversion& c) {
  std::vector<std::string> out;
  for (const auto& origin : c.messages) {
    const MessageOrigin& o = *origin;
    std::string line = path_text(o.source) + " |";
    for (const PartOrigin& p : o.parts) {
      line += " " + std::to_string(p.part) + ":" + path_text(p.source) + (p.is_text ? "" : "*");
    }
    line += " |";
    for (const JsonPath& call : o.tool_calls) line += " " + path_text(call);
    out.push_back(line);
  }
  for (const Breakpoint& b : c.breakpoints) {
    out.push_back("breakpoint " + b.source + " " + b.chat_field + " " + b.tool_name);
  }
  return out;
}

// The conversion through the memos is the plain one's: chat body, origins, breakpoints, and the
// chat request parsed from it.
void expect_as_plain(const std::string& body) {
  auto got = parse_shared(body);
  auto want = parse_messages_request(body);
  ASSERT_EQ(got.ok(), want.ok()) << body;
  if (!want.ok()) {
    EXPECT_EQ(got.error().message, want.error().message);
    return;
  }
  EXPECT_EQ(json::to_json(got->chat.body), json::to_json(want->chat.body)) << body;
  EXPECT_EQ(origin_lines(got->chat), origin_lines(want->chat)) << body;
  auto got_chat = parse_request_value(got->chat.body, Endpoint::kChatCompletions);
  auto want_chat = parse_request_value(want->chat.body, Endpoint::kChatCompletions);
  ASSERT_TRUE(got_chat.ok() && want_chat.ok());
  ASSERT_EQ(got_chat->messages.size(), want_chat->messages.size());
  for (std::size_t i = 0; i < want_chat->messages.size(); ++i) {
    EXPECT_EQ(got_chat->messages[i].text(), want_chat->messages[i].text()) << i;
    EXPECT_EQ(got_chat->messages[i].index, i);
    EXPECT_EQ(got_chat->messages[i].tool_calls, want_chat->messages[i].tool_calls) << i;
  }
}

// The next request's conversation: a turn dropped from the front, the last one replaced, the
// conversation cut back to its start, or (most often) one turn more from `fresh`.
template <class Fresh>
void next_conversation(std::vector<std::string>& turns, std::mt19937_64& rng, Fresh&& fresh) {
  const std::size_t action = rng() % 6;
  if (action == 0 && turns.size() > 2) {
    turns.erase(turns.begin() + static_cast<std::ptrdiff_t>(rng() % 2));
  } else if (action == 1 && !turns.empty()) {
    turns.back() = fresh();
  } else if (action == 2 && turns.size() > 6) {
    turns.resize(2);
  } else {
    turns.push_back(fresh());
  }
}

// An agent's conversation, one turn longer each request: from the turns' second sighting on,
// each earlier turn's chat messages come from the memo (shared in the chat body), and every
// request converts as without it.
TEST_F(ConvertedTurnMemoTest, AGrowingConversationsEarlierTurnsAreNotConvertedAgain) {
  std::vector<std::string> turns;
  for (std::size_t t = 0; t < 12; ++t) {
    turns.push_back(turn_json(t, "turn " + std::to_string(t), false));
    const std::string body = messages_body(turns);
    expect_as_plain(body);
  }
  const ConvertedTurnMemo& memo = ConvertedTurnMemo::for_this_thread();
  EXPECT_GE(memo.entries(), 9u);
  auto again = parse_shared(messages_body(turns));
  ASSERT_TRUE(again.ok());
  std::size_t shared = 0;
  for (const json::Value& m : again->chat.body.find("messages")->as_array()) {
    shared += m.is_shared() ? 1 : 0;
  }
  EXPECT_GE(shared, 10u);  // tool results convert into two chat messages
}

// A kept turn found at another index (an agent that drops its oldest turns) names its new index
// in every origin; a turn with a breakpoint is converted each time (its chat field names a chat
// message's index).
TEST_F(ConvertedTurnMemoTest, AMovedTurnNamesItsNewIndexAndABreakpointIsNotKept) {
  std::vector<std::string> turns;
  for (std::size_t t = 0; t < 8; ++t)
    turns.push_back(turn_json(t, "window " + std::to_string(t), t == 4));
  for (int round = 0; round < 3; ++round) expect_as_plain(messages_body(turns));
  const std::size_t kept = ConvertedTurnMemo::for_this_thread().entries();
  EXPECT_EQ(kept, 7u);  // all but the marked turn
  turns.erase(turns.begin(), turns.begin() + 3);
  expect_as_plain(messages_body(turns));
  EXPECT_EQ(ConvertedTurnMemo::for_this_thread().entries(), kept);
}

// Random conversations (turns of every shape, some marked, added, replaced and dropped) convert
// as without the memo, which stays within its bounds.
TEST_F(ConvertedTurnMemoTest, RandomConversationsConvertAsWithoutTheMemo) {
  std::mt19937_64 rng(20261206);
  std::vector<std::string> turns;
  for (int request = 0; request < 300; ++request) {
    next_conversation(turns, rng, [&] {
      return turn_json(rng(), "t" + std::to_string(rng() % 16), rng() % 5 == 0);
    });
    expect_as_plain(messages_body(turns));
  }
  const ConvertedTurnMemo& memo = ConvertedTurnMemo::for_this_thread();
  EXPECT_GT(memo.entries(), 0u);
  EXPECT_LE(memo.entries(), ConvertedTurnMemo::kMaxEntries);
  EXPECT_LE(memo.total_bytes(), ConvertedTurnMemo::kMaxTotalBytes);
}

// A rewrite of the chat body (canonicalization) is the request's own: the kept turn is not
// changed by it.
TEST_F(ConvertedTurnMemoTest, ChangingAChatBodyLeavesTheKeptTurn) {
  const std::vector<std::string> turns = {turn_json(0, "keep me", false),
                                          turn_json(1, "answer", false)};
  const std::string body = messages_body(turns);
  for (int round = 0; round < 2; ++round) ASSERT_TRUE(parse_shared(body).ok());
  auto first = parse_shared(body);
  ASSERT_TRUE(first.ok());
  json::Value& message = first->chat.body.find("messages")->as_array()[1];
  ASSERT_TRUE(message.is_shared());
  message.set("content", "rewritten");
  expect_as_plain(body);
}

// write_back() passes over a kept turn that canonicalization left alone, and carries back a
// change canonicalization made to one.
TEST_F(ConvertedTurnMemoTest, WriteBackSkipsOnlyTheKeptTurnsLeftAlone) {
  const std::vector<std::string> turns = {turn_json(0, "kept turn", false),
                                          turn_json(1, "kept answer", false),
                                          turn_json(0, "new question", false)};
  const std::string body = messages_body(turns);
  for (int round = 0; round < 2; ++round) ASSERT_TRUE(parse_shared(body).ok());
  auto m = parse_shared(body);
  ASSERT_TRUE(m.ok());
  // Chat message 0 is the system prompt; 1 is the client's first turn.
  ASSERT_TRUE(std::as_const(m->chat.body).find("messages")->as_array()[1].is_shared());
  auto canonical = parse_request_value(m->chat.body, Endpoint::kChatCompletions);
  ASSERT_TRUE(canonical.ok());
  json::Value client = m->body;
  EXPECT_TRUE(write_back(m->chat, *canonical, client, /*tools=*/false).empty());
  EXPECT_EQ(client, m->body);

  // As a canonicalization rule rewrites a text: the request's own copy of the kept turn.
  json::Value& first = canonical->body.find("messages")->as_array()[1];
  first.set("content", "rewritten");
  EXPECT_EQ(write_back(m->chat, *canonical, client, /*tools=*/false),
            std::vector<std::string>{"messages"});
  EXPECT_EQ(client.find("messages")->as_array()[0].find("content")->as_string(), "rewritten");
  // The kept turn itself is unchanged: the next request converts as without the memo.
  expect_as_plain(body);
}

// Responses input items of every kind, long enough for the element memo. A function call is
// never kept (it may extend the assistant message before it); the others are.
std::string item_json(std::size_t kind, std::string_view tag) {
  const std::string text = json::memo_test::turn_text(tag, 160);
  switch (kind % 6) {
    case 0: return R"({"role":"user","content":")" + text + R"("})";
    case 1: return R"({"type":"message","role":"assistant","content":")" + text + R"("})";
    case 2:
      return R"({"type":"function_call","call_id":"c1","name":"grep","arguments":"{\"q\":\")" +
             text + R"(\"}"})";
    case 3: return R"({"type":"function_call_output","call_id":"c1","output":")" + text + R"("})";
    case 4: return R"({"role":"developer","content":")" + text + R"("})";
    default:
      return R"({"role":"user","content":[{"type":"input_text","text":")" + text +
             R"("},{"type":"input_image","image_url":"https://x/a.png"}]})";
  }
}

std::string responses_body(const std::vector<std::string>& items) {
  std::string list;
  for (const std::string& t : items) list += (list.empty() ? "" : ",") + t;
  return R"({"model":"m","instructions":"You are terse.",)"
         R"("tools":[{"type":"function","name":"grep","parameters":{"type":"object"}}],)"
         R"("input":[)" +
         list + "]}";
}

// Random Responses conversations (items of every kind, added, replaced and dropped) convert as
// without the memo: chat body, origins and the chat request parsed from it.
TEST_F(ConvertedTurnMemoTest, RandomResponsesInputsConvertAsWithoutTheMemo) {
  std::mt19937_64 rng(20261207);
  std::vector<std::string> items;
  std::size_t shared_seen = 0;
  for (int request = 0; request < 300; ++request) {
    next_conversation(items, rng,
                      [&] { return item_json(rng(), "i" + std::to_string(rng() % 16)); });
    const std::string body = responses_body(items);
    std::vector<json::SourceMember> source;
    auto got = parse_responses_request(body, RequestLimits{}, source);
    auto want = parse_responses_request(body);
    ASSERT_EQ(got.ok(), want.ok()) << body;
    if (!want.ok()) continue;
    EXPECT_EQ(json::to_json(got->chat.body), json::to_json(want->chat.body)) << body;
    EXPECT_EQ(origin_lines(got->chat), origin_lines(want->chat)) << body;
    for (const json::Value& m : std::as_const(got->chat.body).find("messages")->as_array()) {
      shared_seen += m.is_shared() ? 1 : 0;
    }
    auto got_chat = parse_request_value(got->chat.body, Endpoint::kChatCompletions);
    auto want_chat = parse_request_value(want->chat.body, Endpoint::kChatCompletions);
    ASSERT_EQ(got_chat.ok(), want_chat.ok()) << body;
    if (!want_chat.ok()) continue;
    ASSERT_EQ(got_chat->messages.size(), want_chat->messages.size());
    for (std::size_t i = 0; i < want_chat->messages.size(); ++i) {
      EXPECT_EQ(got_chat->messages[i].text(), want_chat->messages[i].text()) << i;
      EXPECT_EQ(got_chat->messages[i].tool_calls, want_chat->messages[i].tool_calls) << i;
    }
  }
  EXPECT_GT(shared_seen, 100u);  // kept items were added again, shared
}

}  // namespace
}  // namespace prefixgate::canon
