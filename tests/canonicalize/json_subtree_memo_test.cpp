// json::parse's subtree memo: root members named as shared (a request's tool list) are built
// once per thread from their second sighting and then taken from the memo by their bytes. The
// tree, the member spans and every error are what parse() without the memo gives.
#include "json_subtree_memo.h"

#include <gtest/gtest.h>

#include <array>
#include <cstddef>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "json_memo_parse.h"
#include "prefixgate/canonicalize/json.h"

namespace prefixgate::json {
namespace {

constexpr std::array<std::string_view, 2> kToolKeys = {"tools", "functions"};

using SubtreeParse = memo_test::SpannedParse;

SubtreeParse parse_sharing(std::string_view text, const ParseLimits& limits = {}) {
  return memo_test::parse_spanned(text, limits, MemoKeys{.shared = kToolKeys});
}

SubtreeParse parse_plain(std::string_view text, const ParseLimits& limits = {}) {
  return memo_test::parse_spanned(text, limits);
}

// A tool list of about `n` tools, long enough for the memo.
std::string tool_list(int n, std::string_view name = "lookup") {
  std::string list = "[";
  for (int i = 0; i < n; ++i) {
    if (i > 0) list += ',';
    list += R"({"type":"function","function":{"name":")" + std::string(name) + std::to_string(i) +
            R"(","parameters":{"type":"object","properties":{"q":{"type":"string"}}}}})";
  }
  return list + "]";
}

std::string request_with(std::string_view tools, std::string_view user = "hi") {
  return R"({"model":"m","messages":[{"role":"user","content":")" + std::string(user) +
         R"("}],"tools":)" + std::string(tools) + R"(,"max_tokens":1})";
}

const Value* tools_of(const SubtreeParse& p) {
  return p.doc.ok() ? p.doc->find("tools") : nullptr;
}

// Returns whether the parse took a list from the memo or kept one.
bool expect_same_as_plain(std::string_view text, const ParseLimits& limits = {}) {
  const SubtreeParse shared = parse_sharing(text, limits);
  if (!memo_test::expect_same_parse(shared, parse_plain(text, limits), text)) return false;
  if (!shared.doc->is_object()) return false;
  for (std::string_view key : kToolKeys) {
    const Value* list = shared.doc->find(key);
    if (list != nullptr && list->is_shared()) return true;
  }
  return false;
}

TEST(JsonSubtreeMemoTest, AListIsKeptFromItsSecondSightingAndSharedFromThen) {
  const std::string list = tool_list(3, "second_sighting");
  const SubtreeParse first = parse_sharing(request_with(list, "one"));
  const SubtreeParse second = parse_sharing(request_with(list, "two"));
  const SubtreeParse third = parse_sharing(request_with(list, "three"));
  ASSERT_TRUE(tools_of(first) && tools_of(second) && tools_of(third));
  EXPECT_FALSE(tools_of(first)->is_shared());  // seen once: only its bytes noted
  EXPECT_TRUE(tools_of(second)->is_shared());  // built, and kept
  EXPECT_TRUE(tools_of(third)->is_shared());   // taken from the memo
  EXPECT_EQ(&tools_of(second)->as_array(), &tools_of(third)->as_array());
  EXPECT_EQ(*tools_of(third), *tools_of(first));
  EXPECT_EQ(third.doc->find("messages")->as_array()[0].find("content")->as_string(), "three");
  expect_same_as_plain(request_with(list, "four"));
}

TEST(JsonSubtreeMemoTest, AChangeToASharedListStaysInItsOwnDocument) {
  const std::string list = tool_list(2, "own_copy");
  parse_sharing(request_with(list));
  SubtreeParse a = parse_sharing(request_with(list));
  const SubtreeParse b = parse_sharing(request_with(list));
  ASSERT_TRUE(tools_of(a) && tools_of(b));
  const std::string before = to_json(*tools_of(b));
  a.doc->find("tools")->as_array().clear();
  EXPECT_EQ(to_json(*tools_of(b)), before);
  EXPECT_EQ(to_json(*tools_of(parse_sharing(request_with(list)))), before);
}

TEST(JsonSubtreeMemoTest, OnlyNamedRootContainersOfSomeSizeAreShared) {
  const std::string list = tool_list(2, "named");
  const std::string nested = R"({"outer":{"tools":)" + list + "}}";
  const std::string other_key = R"({"schemas":)" + list + "}";
  const std::string small = R"({"tools":[{"a":1}]})";
  const std::string functions = R"({"functions":)" + list + "}";
  for (int i = 0; i < 3; ++i) {
    const SubtreeParse n = parse_sharing(nested);
    EXPECT_FALSE(n.doc->find("outer")->find("tools")->is_shared());
    EXPECT_FALSE(parse_sharing(other_key).doc->find("schemas")->is_shared());
    EXPECT_FALSE(parse_sharing(small).doc->find("tools")->is_shared());
  }
  parse_sharing(functions);
  EXPECT_TRUE(parse_sharing(functions).doc->find("functions")->is_shared());
  // A string under a shared key is a scalar: built each time.
  const std::string text = R"({"tools":")" + std::string(100, 'x') + R"("})";
  parse_sharing(text);
  EXPECT_FALSE(parse_sharing(text).doc->find("tools")->is_shared());
}

// The memo's bytes must be the whole value: a list that differs only after a kept one's first
// bytes, or only in its last, is another list.
TEST(JsonSubtreeMemoTest, ADifferentByteAnywhereIsAnotherList) {
  const std::string list = tool_list(3, "differs");
  parse_sharing(request_with(list));
  parse_sharing(request_with(list));
  std::string longer = list;
  longer.insert(longer.size() - 1, R"(,{"type":"function","function":{"name":"extra"}})");
  std::string last_byte = list;
  last_byte[last_byte.rfind("string") + 5] = 'X';  // the last tool's last string
  std::string spaced = list;
  spaced.insert(1, " ");
  for (const std::string& other : {longer, last_byte, spaced}) {
    const SubtreeParse p = parse_sharing(request_with(other));
    ASSERT_TRUE(p.doc.ok()) << other;
    EXPECT_FALSE(tools_of(p)->is_shared()) << other;
    expect_same_as_plain(request_with(other));
  }
  // Whitespace after the list is not part of it.
  const std::string after = R"({"tools":)" + list + " \n\t" + R"(,"model":"m"})";
  expect_same_as_plain(after);
  EXPECT_TRUE(tools_of(parse_sharing(after))->is_shared());
}

TEST(JsonSubtreeMemoTest, ALowerDepthLimitStillRefusesAKeptList) {
  const std::string deep =
      R"({"tools":[{"a":{"b":{"c":{"d":"0123456789012345678901234567890123456789012"}}}}]})";
  parse_sharing(deep);
  ASSERT_TRUE(tools_of(parse_sharing(deep))->is_shared());
  ParseLimits shallow;
  shallow.max_depth = 4;
  const SubtreeParse p = parse_sharing(deep, shallow);
  ASSERT_FALSE(p.doc.ok());
  EXPECT_EQ(p.doc.error().code, ErrorCode::kTooDeep);
  expect_same_as_plain(deep, shallow);
}

// Errors outside a shared list, and a repeated key naming it, are found as without the memo.
TEST(JsonSubtreeMemoTest, ErrorsAroundASharedListAreTheSame) {
  const std::string list = tool_list(2, "errors");
  parse_sharing(request_with(list));
  parse_sharing(request_with(list));
  for (const std::string& text : {
           R"({"tools":)" + list + R"(,"tools":[]})",
           R"({"tools":[],"tools":)" + list + "}",
           R"({"tools":)" + list + R"(,"model":"m","model":"n"})",
           R"({"tools":)" + list + R"(,"model":tru})",
           R"({"tools":)" + list + R"(,"model":"m")",
           R"({"tools":)" + list + R"(} x)",
           R"({"tools":)" + list + R"(,"n":1e400})",
       }) {
    expect_same_as_plain(text);
  }
}

// More distinct lists than the memo has slots, in rotation: each is evicted before it comes
// again, so none is ever kept or built twice for nothing.
TEST(JsonSubtreeMemoTest, MoreListsThanSlotsInRotationAreNeverKept) {
  std::vector<std::string> lists;
  for (std::size_t i = 0; i <= internal::SubtreeMemo::kEntries; ++i) {
    lists.push_back(tool_list(2, "rotation" + std::to_string(i)));
  }
  for (int round = 0; round < 3; ++round) {
    for (const std::string& list : lists) {
      const SubtreeParse p = parse_sharing(request_with(list));
      ASSERT_TRUE(p.doc.ok());
      EXPECT_FALSE(tools_of(p)->is_shared());
    }
  }
}

TEST(JsonSubtreeMemoTest, EachThreadKeepsItsOwn) {
  const std::string list = tool_list(2, "threads");
  parse_sharing(request_with(list));
  const SubtreeParse here = parse_sharing(request_with(list));
  ASSERT_TRUE(tools_of(here)->is_shared());
  bool shared_there = true;
  std::thread([&] {
    shared_there = tools_of(parse_sharing(request_with(list)))->is_shared();
  }).join();
  EXPECT_FALSE(shared_there);
}

// Random requests over a few tool lists (so that most are memo hits) and their near variants,
// with random whitespace and neighbours: the same trees, spans and errors as without the memo.
TEST(JsonSubtreeMemoTest, RandomRequestsParseAsWithoutTheMemo) {
  std::mt19937 rng(20261203);
  std::vector<std::string> lists;
  for (int i = 0; i < 3; ++i) lists.push_back(tool_list(1 + i, "random"));
  lists.push_back(
      R"({"type":"object","properties":{"q":{"type":"string","description":"query"}}})");
  const auto pick = [&](std::size_t n) { return static_cast<std::size_t>(rng() % n); };
  const std::array<std::string_view, 4> spaces = {"", " ", "\n  ", "\t"};
  int shared = 0;
  for (int iter = 0; iter < 2000; ++iter) {
    std::string list = lists[pick(lists.size())];
    switch (pick(6)) {
      case 0: list.insert(list.size() - 1, " "); break;      // a space before the close
      case 1: list[pick(list.size() - 2) + 1] = 'z'; break;  // a byte changed (maybe invalid)
      case 2: list.pop_back(); break;                        // cut short
      default: break;
    }
    const std::string_view key = pick(4) == 0 ? "functions" : "tools";
    std::string text = "{";
    text += spaces[pick(spaces.size())];
    if (pick(2) == 0) text += R"("model":"m",)";
    text += "\"" + std::string(key) + "\":";
    text += spaces[pick(spaces.size())];
    text += list;
    text += spaces[pick(spaces.size())];
    if (pick(2) == 0) text += R"(,"n":)" + std::to_string(pick(100));
    if (pick(8) == 0) text += ",\"" + std::string(key) + "\":1";  // a repeated key
    text += "}";
    shared += expect_same_as_plain(text) ? 1 : 0;
  }
  EXPECT_GT(shared, 200);  // many lists came from the memo (variants evict one another)
}

}  // namespace
}  // namespace prefixgate::json
