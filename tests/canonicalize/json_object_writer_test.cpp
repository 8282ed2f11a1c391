// JsonObjectWriter writes the bytes json::to_json() gives for the same members (and, as an SSE
// event, what append_sse() of them gives): strings that need every kind of escape, numbers,
// nulls, trees, arrays, raw JSON, members written before and nested objects.
#include "json_object_writer.h"

#include <gtest/gtest.h>

#include <random>
#include <string>

#include "prefixgate/canonicalize/json.h"
#include "prefixgate/canonicalize/sse.h"

namespace prefixgate::canon {
namespace {

std::string random_text(std::mt19937& rng) {
  // Quotes, backslashes, control characters, DEL and multi-byte UTF-8 among plain letters.
  static const std::string kPieces[] = {
      "a",    "Z",    " ", "\"",       "\\",           "\n", "\t", "\x01",
      "\x1f", "\x7f", "/", "\xc3\xa9", "\xe2\x82\xac", "{",  "}"};
  std::string out;
  const std::size_t n = std::uniform_int_distribution<std::size_t>(0, 40)(rng);
  for (std::size_t i = 0; i < n; ++i) {
    out += kPieces[std::uniform_int_distribution<std::size_t>(0, std::size(kPieces) - 1)(rng)];
  }
  return out;
}

TEST(JsonObjectWriterTest, WritesWhatSerializingTheSameObjectGives) {
  std::mt19937 rng(11);
  for (int round = 0; round < 500; ++round) {
    const std::string type = round % 2 ? "content_block_delta" : "response.output_text.delta";
    const std::string text = random_text(rng), id = random_text(rng);
    const std::size_t index = std::uniform_int_distribution<std::size_t>(0, 1u << 20)(rng);
    const std::size_t sequence = static_cast<std::size_t>(round);

    const json::Value tree = json::Object{{"text", text}, {"n", json::Value()}};
    const json::Array list = {json::Value(text), tree, json::Value(1.5)};
    std::string earlier;  // members written before, as a reply's echo is
    JsonObjectWriter(earlier).string("echo", id).value("tree", tree).end();
    earlier = earlier.substr(1, earlier.size() - 2);

    std::string got;
    sse_json_event(got, type)
        .string("item_id", id)
        .number("index", index)
        .open("delta")
        .string("type", "text_delta")
        .string("text", text)
        .close()
        .json("logprobs", "[]")
        .null("error")
        .value("tree", tree)
        .array("list", list)
        .members(earlier)
        .members("")
        .number("sequence_number", sequence)
        .end();

    const json::Value data =
        json::Object{{"type", type},
                     {"item_id", id},
                     {"index", json::Value(static_cast<double>(index))},
                     {"delta", json::Object{{"type", "text_delta"}, {"text", text}}},
                     {"logprobs", json::Array{}},
                     {"error", json::Value()},
                     {"tree", tree},
                     {"list", list},
                     {"echo", id},
                     {"tree", tree},
                     {"sequence_number", json::Value(static_cast<double>(sequence))}};
    std::string want;
    append_sse(want, type, json::to_json(data));
    ASSERT_EQ(got, want) << round;
  }
}

TEST(JsonObjectWriterTest, AnObjectOpenedFirstHasNoCommaBeforeItsFirstMember) {
  std::string got;
  sse_json_event(got, "e").open("a").open("b").number("n", 1).close().close().end();
  EXPECT_EQ(got, "event: e\ndata: {\"type\":\"e\",\"a\":{\"b\":{\"n\":1}}}\n\n");
  got = "x";
  JsonObjectWriter(got).members("\"m\":1").open("o").members("\"p\":2").close().end();
  EXPECT_EQ(got, "x{\"m\":1,\"o\":{\"p\":2}}");
}

}  // namespace
}  // namespace prefixgate::canon
