// parse_plain_chat_chunk: a streamed chat chunk read without a tree. Over random chunks, plain
// and otherwise, valid and broken: every plain one is read, and whatever is read is what
// parse_chat_chunk() of json::parse()'s tree gives, for a text parse() accepts.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "prefixgate/canonicalize/chat_reply.h"
#include "prefixgate/canonicalize/json.h"

namespace prefixgate::canon {
namespace {

class ChunkMaker {
 public:
  explicit ChunkMaker(unsigned seed) : rng_(seed) {}

  std::size_t pick(std::size_t n) {
    return std::uniform_int_distribution<std::size_t>(0, n - 1)(rng_);
  }

  // A JSON string literal with escapes, multi-byte UTF-8 and braces among letters.
  std::string quoted() {
    static const std::vector<std::string> kPieces = {
        "a",        "Z", " ", "\\\"", "\\\\", "\\n", "\\t", "\\u00e9", "\\ud83d\\ude00",
        "\xc3\xa9", "{", "}", "\\/",  ":"};
    std::string out = "\"";
    for (std::size_t n = pick(12); n > 0; --n) out += kPieces[pick(kPieces.size())];
    return out + "\"";
  }

  std::string scalar() {
    switch (pick(6)) {
      case 0: return quoted();
      case 1: return std::to_string(pick(1u << 30));
      case 2: return "-1.5e-3";
      case 3: return "true";
      case 4: return "false";
      default: return "null";
    }
  }

  // Members joined into an object, with a little whitespace now and then.
  std::string object(const std::vector<std::string>& members) {
    std::string out = "{";
    for (std::size_t i = 0; i < members.size(); ++i) {
      if (i > 0) out += pick(4) == 0 ? " , " : ",";
      out += members[i];
    }
    return out + "}";
  }

  // A tool call's index: the counts parse_chat_chunk takes whole, cuts or clamps, and values that
  // are no number (the call's position stands in).
  std::string index() {
    static const std::vector<std::string> kIndexes = {"0",   "1",    "7",     "-1",   "2.5",
                                                      "1e3", "1e30", "\"2\"", "null", "true"};
    return kIndexes[pick(kIndexes.size())];
  }

  // `tool_calls`' array as an upstream streams a call's pieces: the first with its id and name,
  // later ones with a piece of the arguments; now and then something the fast read gives up on
  // (a container it does not read, a call that is no object), which clears `plain`.
  std::string tool_calls(bool& plain) {
    std::vector<std::string> calls;
    for (std::size_t n = pick(4); n > 0; --n) {
      std::vector<std::string> call;
      if (pick(4) != 0) call.push_back(R"("index":)" + index());
      if (pick(2) == 0) call.push_back(R"("id":)" + (pick(6) == 0 ? scalar() : quoted()));
      if (pick(2) == 0) call.push_back(R"("type":"function")");
      std::vector<std::string> function;
      if (pick(2) == 0) function.push_back(R"("name":)" + (pick(6) == 0 ? scalar() : quoted()));
      if (pick(4) != 0) function.push_back(R"("arguments":)" + quoted());
      if (pick(8) == 0) function.push_back(R"("strict":)" + scalar());
      if (pick(16) == 0) {
        function.push_back(R"("parameters":{})");
        plain = false;
      }
      switch (pick(8)) {
        case 0: call.push_back(R"("function":null)"); break;
        case 1: call.push_back(R"("function":)" + scalar()); break;
        case 2: break;
        default: call.push_back(R"("function":)" + object(function));
      }
      if (call.size() > 1 && pick(3) == 0) std::swap(call.front(), call.back());
      calls.push_back(object(call));
      if (pick(24) == 0) {
        calls.back() = pick(2) == 0 ? "1" : "[]";  // no call: parse_chat_chunk refuses it
        plain = false;
      }
    }
    std::string out = "[";
    for (std::size_t i = 0; i < calls.size(); ++i) out += (i > 0 ? "," : "") + calls[i];
    return out + "]";
  }

  // A chunk as a chat upstream streams it; `plain` says whether it is the plain kind.
  std::string chunk(bool& plain) {
    plain = true;
    std::vector<std::string> delta;
    if (pick(3) == 0) delta.push_back(R"("role":"assistant")");
    const std::size_t content = pick(5);
    if (content < 3) delta.push_back(R"("content":)" + quoted());
    if (content == 3) delta.push_back(R"("content":null)");
    if (pick(6) == 0) delta.push_back(R"("reasoning_content":)" + quoted());
    const std::size_t calls = pick(8);
    if (calls == 0) delta.push_back(R"("tool_calls":null)");
    if (calls >= 6) delta.push_back(R"("tool_calls":)" + tool_calls(plain));
    std::vector<std::string> choice = {R"("index":0)"};
    const std::size_t delta_kind = pick(10);
    if (delta_kind < 8) choice.push_back(R"("delta":)" + object(delta));
    if (delta_kind == 8) choice.push_back(R"("delta":null)");
    choice.push_back(R"("logprobs":null)");
    choice.push_back(R"("finish_reason":)" + (pick(3) == 0 ? std::string(R"("stop")") : "null"));
    if (pick(2) == 0) choice.push_back(R"("stop_reason":)" + scalar());
    if (pick(10) == 0) {
      choice.push_back(R"("logprobs":{"content":[]})");  // repeated, and a container
      plain = false;
    }
    std::vector<std::string> root = {
        R"("id":)" + (pick(8) == 0 ? scalar() : quoted()), R"("object":"chat.completion.chunk")",
        R"("created":)" + std::to_string(1796559598 + pick(100)), R"("model":)" + quoted()};
    const std::size_t choices = pick(12);
    if (choices < 9) root.push_back(R"("choices":[)" + object(choice) + "]");
    if (choices == 9) root.push_back(R"("choices":[])");
    if (choices == 10) {
      root.push_back(R"("choices":[)" + object(choice) + "," + object(choice) + "]");
      plain = false;
    }
    if (choices == 11) plain = false;  // no choices: not a chunk parse_chat_chunk reads
    if (pick(6) == 0) root.push_back(R"("usage":null)");
    if (pick(10) == 0) {
      root.push_back(R"("usage":{"prompt_tokens":5,"completion_tokens":2})");
      plain = false;
    }
    if (pick(20) == 0) {
      root.push_back(R"("error":{"message":"boom"})");
      plain = false;
    }
    if (pick(5) == 0) std::swap(root[pick(root.size())], root[pick(root.size())]);
    std::string text = object(root);
    switch (pick(17)) {  // something broken, or not what a chunk is
      case 0: text += pick(2) == 0 ? " x" : "]"; break;
      case 1: text = text.substr(0, pick(text.size())); break;
      case 2: text.insert(text.find("\"created\":") + 10, "0"); break;          // a leading zero
      case 3: text.replace(text.find("\"created\":"), 9, R"("model")"); break;  // a repeat
      case 4: {
        const std::size_t at = text.find("null");
        if (at != std::string::npos) text.replace(at, 4, "nul ");
        break;
      }
      case 5: text.insert(text.find('"', 2) + 1, "\x01"); break;  // a raw control character
      case 6: text.insert(text.find('"', 2) + 1, "\xff"); break;  // not UTF-8
      case 7: text = "[" + text + "]"; break;
      case 8:
        text += "\n\t ";
        break;  // whitespace after is fine
      // Anywhere: a control character, a backslash, a quote (inside a string or between tokens).
      case 9: text.insert(pick(text.size()), 1, static_cast<char>(pick(0x20))); break;
      case 10: text.insert(pick(text.size()), "\\"); break;
      case 11: text.insert(pick(text.size()), "\""); break;
      default: return text;
    }
    plain = false;  // whether parse() takes it, the comparison below decides
    return text;
  }

 private:
  std::mt19937 rng_;
};

TEST(ChatChunkTextTest, ReadsEveryPlainChunkAsTheTreeDoesAndNothingTheTreeRefuses) {
  ChunkMaker maker(3);
  std::size_t read = 0, plain_made = 0, plain_with_calls = 0, declined_valid = 0;
  for (int round = 0; round < 20000; ++round) {
    bool plain = false;
    const std::string text = maker.chunk(plain);
    const std::optional<ChatReply> fast = parse_plain_chat_chunk(text);
    const auto doc = json::parse(text);
    plain_made += plain ? 1 : 0;
    if (plain) {
      ASSERT_TRUE(fast.has_value()) << "a plain chunk was not read: " << text;
      plain_with_calls += fast->tool_calls.empty() ? 0 : 1;
    }
    if (!fast) {
      if (doc && doc->is_object()) ++declined_valid;
      continue;
    }
    ++read;
    ASSERT_TRUE(doc.ok()) << "read what parse() refuses: " << text;
    ASSERT_TRUE(doc->is_object()) << text;
    const json::Value* error = doc->find("error");
    EXPECT_TRUE(error == nullptr || error->is_null()) << text;
    const auto tree = parse_chat_chunk(*doc);
    ASSERT_TRUE(tree.ok()) << text;
    EXPECT_FALSE(tree->usage.has_value()) << text;
    EXPECT_TRUE(*tree == *fast) << text;
  }
  // A fifth of the chunks made are plain, among them over 400 with tool calls, and many
  // valid ones are not (logprobs, usage, an error, two choices).
  EXPECT_GT(plain_made, 3000u);
  EXPECT_GT(plain_with_calls, 400u);
  EXPECT_GE(read, plain_made);
  EXPECT_GT(declined_valid, 1000u);
}

TEST(ChatChunkTextTest, AnEngineChunkIsReadWithItsTextAndEnd) {
  const auto first = parse_plain_chat_chunk(
      R"({"id":"chatcmpl-9","object":"chat.completion.chunk","created":1,"model":"m",)"
      R"("choices":[{"index":0,"delta":{"role":"assistant","content":"He said \"hi\"\n"},)"
      R"("logprobs":null,"finish_reason":null}]})");
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->id, "chatcmpl-9");
  EXPECT_EQ(first->model, "m");
  EXPECT_EQ(first->text, "He said \"hi\"\n");
  EXPECT_EQ(first->finish_reason, "");
  const auto last = parse_plain_chat_chunk(
      R"({"choices":[{"index":0,"delta":{},"finish_reason":"stop","stop_reason":"END"}]})");
  ASSERT_TRUE(last.has_value());
  EXPECT_EQ(last->text, "");
  EXPECT_EQ(last->finish_reason, "stop");
  EXPECT_EQ(last->stop_string, "END");
  // Whitespace may follow the object; nothing else may.
  const std::string chunk = R"({"choices":[{"index":0,"delta":{"content":"x"}}]})";
  EXPECT_TRUE(parse_plain_chat_chunk(chunk + " \n").has_value());
  for (const char* after : {" x", "}", "]", "{}", "1", ",{}"}) {
    EXPECT_FALSE(parse_plain_chat_chunk(chunk + after).has_value()) << after;
  }
}

TEST(ChatChunkTextTest, AToolCallsPiecesAreReadWithTheirIndexIdNameAndArguments) {
  // As vLLM streams a call: its id and name first, then the arguments a piece at a time.
  const auto first = parse_plain_chat_chunk(
      R"({"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":)"
      R"([{"index":0,"delta":{"tool_calls":[{"id":"chatcmpl-tool-7","type":"function","index":1,)"
      R"("function":{"name":"get_weather","arguments":""}}]},"logprobs":null,)"
      R"("finish_reason":null}]})");
  ASSERT_TRUE(first.has_value());
  ASSERT_EQ(first->tool_calls.size(), 1u);
  EXPECT_EQ(first->tool_calls[0].index, 1u);
  EXPECT_EQ(first->tool_calls[0].id, "chatcmpl-tool-7");
  EXPECT_EQ(first->tool_calls[0].name, "get_weather");
  EXPECT_EQ(first->tool_calls[0].arguments, "");
  const auto piece = parse_plain_chat_chunk(
      R"({"choices":[{"index":0,"delta":{"tool_calls":[{"function":{"arguments":"{\"city\": "}},)"
      R"({"index":2.9,"function":{"arguments":"\"Oslo\"}"}}]}}]})");
  ASSERT_TRUE(piece.has_value());
  ASSERT_EQ(piece->tool_calls.size(), 2u);
  EXPECT_EQ(piece->tool_calls[0].index, 0u);  // no index: its position
  EXPECT_EQ(piece->tool_calls[0].arguments, "{\"city\": ");
  EXPECT_EQ(piece->tool_calls[1].index, 2u);
  EXPECT_EQ(piece->tool_calls[1].arguments, "\"Oslo\"}");
  // A call that is no object, or a function holding a container, is left to the whole parse.
  for (const char* calls : {R"([1])", R"([{"function":{"parameters":{}}}])", R"({})"}) {
    EXPECT_FALSE(parse_plain_chat_chunk(std::string(R"({"choices":[{"delta":{"tool_calls":)") +
                                        calls + "}}]}")
                     .has_value())
        << calls;
  }
}

}  // namespace
}  // namespace prefixgate::canon
