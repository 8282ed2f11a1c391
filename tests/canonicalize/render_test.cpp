#include "prefixgate/canonicalize/render.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "support/requests.h"

namespace prefixgate::canon {
namespace {

using test_support::chat;

constexpr std::string_view kTwoTurns = R"({"messages":[
  {"role":"system","content":"  Be brief.\n"},
  {"role":"user","content":"What is 2+2?"}]})";

TEST(RenderTest, Llama3MatchesMetaTemplate) {
  RenderedPrompt p = render_prompt(chat(kTwoTurns), ChatTemplate::kLlama3);
  EXPECT_EQ(p.text,
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nWhat is 2+2?<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
  EXPECT_EQ(p.text.substr(p.volatile_tail_begin, 12), "What is 2+2?");
}

TEST(RenderTest, ChatmlMatchesQwenLayout) {
  RenderedPrompt p = render_prompt(chat(kTwoTurns), ChatTemplate::kChatml);
  EXPECT_EQ(
      p.text,
      "<|im_start|>system\n  Be brief.\n<|im_end|>\n<|im_start|>user\nWhat is 2+2?<|im_end|>\n"
      "<|im_start|>assistant\n");
}

TEST(RenderTest, PlainTemplate) {
  RenderedPrompt p = render_prompt(chat(kTwoTurns), ChatTemplate::kPlain);
  EXPECT_EQ(p.text, "system:   Be brief.\n\n\nuser: What is 2+2?\n\nassistant:");
}

TEST(RenderTest, SegmentsNameTheFieldsTheyCameFrom) {
  RenderedPrompt p = render_prompt(chat(kTwoTurns), ChatTemplate::kLlama3);
  const std::size_t at = p.text.find("Be brief");
  ASSERT_NE(p.segment_at(at), nullptr);
  EXPECT_EQ(p.segment_at(at)->source, "messages[0].content");
  EXPECT_EQ(p.segment_at(at)->message_index, 0);
  EXPECT_EQ(p.segment_at(0)->source, "template");
  EXPECT_EQ(p.segment_at(p.text.size()), nullptr);
  // Segments tile the text with no gap.
  std::size_t pos = 0;
  for (const Segment& s : p.segments) {
    EXPECT_EQ(s.begin, pos);
    pos = s.end;
  }
  EXPECT_EQ(pos, p.text.size());
}

// Markup between two messages' contents is one segment, and no content lies in a markup segment:
// every template's segments, source and text, for a conversation with an assistant turn.
TEST(RenderTest, MarkupAndContentAlternateInSegmentsOfTheirOwn) {
  constexpr std::string_view kThreeTurns = R"({"messages":[
    {"role":"system","content":"Be brief."},
    {"role":"user","content":"Hi"},
    {"role":"assistant","content":"Hello"},
    {"role":"user","content":"Bye"}]})";
  for (const ChatTemplate tmpl :
       {ChatTemplate::kLlama3, ChatTemplate::kChatml, ChatTemplate::kPlain}) {
    const RenderedPrompt p = render_prompt(chat(kThreeTurns), tmpl);
    std::vector<std::string> seen;
    for (const Segment& s : p.segments) {
      const std::string text = p.text.substr(s.begin, s.end - s.begin);
      seen.push_back(s.source == "template" ? "template" : s.source + "=" + text);
      if (s.source == "template") {
        EXPECT_EQ(s.message_index, -1) << text;
        for (const std::string_view content : {"Be brief.", "Hi", "Hello", "Bye"}) {
          EXPECT_EQ(text.find(content), std::string::npos)
              << chat_template_name(tmpl) << ": " << text;
        }
      }
    }
    EXPECT_EQ(seen, (std::vector<std::string>{"template", "messages[0].content=Be brief.",
                                              "template", "messages[1].content=Hi", "template",
                                              "messages[2].content=Hello", "template",
                                              "messages[3].content=Bye", "template"}))
        << chat_template_name(tmpl);
  }
}

TEST(RenderTest, ToolsAreRenderedInClientKeyOrderInTheSystemTurn) {
  auto a = chat(R"({"messages":[{"role":"system","content":"S"},{"role":"user","content":"U"}],
    "tools":[{"type":"function","function":{"name":"f","parameters":{"b":1,"a":2}}}]})");
  auto b = chat(R"({"messages":[{"role":"system","content":"S"},{"role":"user","content":"U"}],
    "tools":[{"type":"function","function":{"parameters":{"a":2,"b":1},"name":"f"}}]})");
  RenderedPrompt pa = render_prompt(a, ChatTemplate::kLlama3);
  RenderedPrompt pb = render_prompt(b, ChatTemplate::kLlama3);
  EXPECT_NE(pa.text, pb.text);  // key order is visible to the model, as with HF `tojson`
  const std::size_t tool_at = pa.text.find(R"({"type":"function")");
  ASSERT_NE(tool_at, std::string::npos);
  EXPECT_LT(tool_at, pa.text.find("<|eot_id|>"));  // inside the system turn
  EXPECT_EQ(pa.segment_at(tool_at)->source, "tools[0]");
}

TEST(RenderTest, ToolsWithoutSystemMessageGetTheirOwnSystemTurn) {
  auto r = chat(R"({"messages":[{"role":"user","content":"U"}],
    "tools":[{"type":"function","function":{"name":"f"}}]})");
  RenderedPrompt p = render_prompt(r, ChatTemplate::kChatml);
  EXPECT_TRUE(p.text.starts_with("<|im_start|>system\n# Tools"));
  EXPECT_NE(p.text.find("<tools>\n{\"type\":\"function\",\"function\":{\"name\":\"f\"}}\n</tools>"),
            std::string::npos);
}

TEST(RenderTest, NonTextPartsAreRenderedAsTheirJson) {
  auto a = chat(
      R"({"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"a.png"}}]}]})");
  auto b = chat(
      R"({"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"b.png"}}]}]})");
  EXPECT_NE(render_prompt(a, ChatTemplate::kLlama3).text,
            render_prompt(b, ChatTemplate::kLlama3).text);
}

TEST(RenderTest, CompletionPromptIsVerbatimAndAllPrefix) {
  auto r = parse_request(R"({"prompt":"Once upon a time"})", Endpoint::kCompletions);
  ASSERT_TRUE(r);
  RenderedPrompt p = render_prompt(*r, ChatTemplate::kLlama3);
  EXPECT_EQ(p.text, "Once upon a time");
  EXPECT_EQ(p.volatile_tail_begin, p.text.size());
}

TEST(RenderTest, ByteTokenizerSeesTemplateMarkupAsSpecialTokens) {
  RenderedPrompt p = render_prompt(chat(kTwoTurns), ChatTemplate::kLlama3);
  auto tok = make_byte_tokenizer();
  TokenizedPrompt t = tokenize_prompt(p, *tok);
  ASSERT_FALSE(t.tokens.empty());
  EXPECT_EQ(t.tokens[0], *tok->special_token("<|begin_of_text|>"));
  EXPECT_EQ(t.tokens[1], *tok->special_token("<|start_header_id|>"));
  EXPECT_EQ(t.tokens[2], static_cast<TokenId>('s'));
  ASSERT_EQ(t.byte_offsets.size(), t.tokens.size());
  const std::size_t at = p.text.find("Be brief");
  EXPECT_EQ(t.tokens[t.token_at_byte(at)], static_cast<TokenId>('B'));
  EXPECT_EQ(tok->decode(t.tokens), p.text);
}

// A thread renders every request into one prompt, whose segments are assigned over: whatever
// came before (longer, shorter, with parts, tool calls and tools, a completion), each rendering
// is the one a fresh prompt gets, text, segments and the volatile tail alike.
TEST(RenderTest, APromptRenderedIntoAgainIsTheFreshRendering) {
  const std::vector<ParsedRequest> requests = {
      chat(R"({"messages":[{"role":"system","content":"s"},{"role":"user","content":"u1"},
        {"role":"assistant","content":"a1"},{"role":"user","content":"u2"},
        {"role":"assistant","content":"a2"},{"role":"user","content":"u3"}],
        "tools":[{"type":"function","function":{"name":"f"}},
                 {"type":"function","function":{"name":"g"}}]})"),
      chat(kTwoTurns),
      chat(R"({"messages":[{"role":"user","content":[{"type":"text","text":"look"},
        {"type":"image_url","image_url":{"url":"a.png"}},{"type":"text","text":"here"}]}]})"),
      chat(R"({"messages":[{"role":"user","content":"call it"},{"role":"assistant","content":"",
        "tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}},
                      {"id":"c2","type":"function","function":{"name":"g","arguments":"{}"}}]},
        {"role":"tool","tool_call_id":"c1","content":"done"}]})"),
      *parse_request(R"({"prompt":"Once upon a time"})", Endpoint::kCompletions),
      chat(R"({"messages":[{"role":"user","content":"last"}]})"),
  };
  for (const ChatTemplate tmpl :
       {ChatTemplate::kLlama3, ChatTemplate::kChatml, ChatTemplate::kPlain}) {
    RenderedPrompt reused;
    // Each request after each other one, the long conversation again at the end.
    for (int round = 0; round < 2; ++round) {
      for (std::size_t i = 0; i < requests.size(); ++i) {
        SCOPED_TRACE(testing::Message() << chat_template_name(tmpl) << " request " << i);
        const RenderedPrompt fresh = render_prompt(requests[i], tmpl);
        render_prompt_into(requests[i], tmpl, reused);
        EXPECT_EQ(reused.text, fresh.text);
        EXPECT_EQ(reused.volatile_tail_begin, fresh.volatile_tail_begin);
        ASSERT_EQ(reused.segments.size(), fresh.segments.size());
        for (std::size_t k = 0; k < fresh.segments.size(); ++k) {
          const Segment& a = reused.segments[k];
          const Segment& b = fresh.segments[k];
          EXPECT_EQ(a.begin, b.begin);
          EXPECT_EQ(a.end, b.end);
          EXPECT_EQ(a.source, b.source);
          EXPECT_EQ(a.message_index, b.message_index);
          EXPECT_EQ(a.copied_at, b.copied_at);
          EXPECT_EQ(a.copied_from.view().data(), b.copied_from.view().data());
        }
      }
    }
  }
}

TEST(RenderTest, UnknownTemplateNameIsNotFound) {
  auto t = chat_template_from_name("vicuna");
  ASSERT_FALSE(t);
  EXPECT_EQ(t.error().code, ErrorCode::kNotFound);
  EXPECT_NE(t.error().message.find("llama-3"), std::string::npos);
  EXPECT_EQ(*chat_template_from_name("chatml"), ChatTemplate::kChatml);
}

}  // namespace
}  // namespace prefixgate::canon
