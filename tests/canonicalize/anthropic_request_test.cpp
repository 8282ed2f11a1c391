// canon::parse_messages_request: validation, the Chat Completions equivalent of an Anthropic
// Messages request, and that both shapes of one conversation hash to the same prefix blocks.
#include <gtest/gtest.h>

#include "prefixgate/canonicalize/anthropic.h"
#include "prefixgate/canonicalize/chat_format.h"
#include "prefixgate/canonicalize/policy.h"
#include "prefixgate/canonicalize/prompt.h"

namespace prefixgate::canon {
namespace {

// One agent step: system prompt blocks, two tools, a tool call and its result, a new question.
constexpr std::string_view kMessages = R"({
  "model": "builtin:tiny", "max_tokens": 64,
  "system": [{"type": "text", "text": "You are a coding agent."},
             {"type": "text", "text": "Repository: prefixgate.", "cache_control": {"type": "ephemeral"}}],
  "tools": [
    {"name": "read_file", "description": "Reads a file",
     "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}},
    {"name": "grep", "description": "Searches files",
     "input_schema": {"type": "object", "properties": {"pattern": {"type": "string"}}},
     "cache_control": {"type": "ephemeral"}}],
  "messages": [
    {"role": "user", "content": "Where is the router?"},
    {"role": "assistant", "content": [
      {"type": "text", "text": "Let me look."},
      {"type": "tool_use", "id": "toolu_1", "name": "grep", "input": {"pattern": "route", "max": 3}}]},
    {"role": "user", "content": [
      {"type": "tool_result", "tool_use_id": "toolu_1", "content": "gateway/src/routing.cpp"},
      {"type": "text", "text": "Open it.", "cache_control": {"type": "ephemeral"}}]}],
  "stop_sequences": ["\n\nHuman:"], "temperature": 0.5, "top_k": 40, "stream": true,
  "metadata": {"user_id": "dev-7"}
})";

// The same conversation as a Chat Completions client would send it.
constexpr std::string_view kChat = R"({
  "model": "builtin:tiny", "max_tokens": 64,
  "messages": [
    {"role": "system", "content": [{"type": "text", "text": "You are a coding agent."},
                                   {"type": "text", "text": "Repository: prefixgate."}]},
    {"role": "user", "content": "Where is the router?"},
    {"role": "assistant", "content": "Let me look.", "tool_calls": [
      {"id": "toolu_1", "type": "function",
       "function": {"name": "grep", "arguments": "{\"pattern\":\"route\",\"max\":3}"}}]},
    {"role": "tool", "tool_call_id": "toolu_1", "content": "gateway/src/routing.cpp"},
    {"role": "user", "content": "Open it."}],
  "tools": [
    {"type": "function", "function": {"name": "read_file", "description": "Reads a file",
     "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}},
    {"type": "function", "function": {"name": "grep", "description": "Searches files",
     "parameters": {"type": "object", "properties": {"pattern": {"type": "string"}}}}}]
})";

MessagesRequest messages(std::string_view body) {
  auto m = parse_messages_request(body);
  EXPECT_TRUE(m) << m.error().param << ": " << m.error().message;
  return m ? std::move(*m) : MessagesRequest{};
}

ParsedRequest chat_of(const json::Value& body) {
  auto r = parse_request_value(body, Endpoint::kChatCompletions);
  EXPECT_TRUE(r) << r.error().param << ": " << r.error().message;
  return r ? std::move(*r) : ParsedRequest{};
}

// The gateway's default canonicalization: tool JSON and tool order rewritten.
ParsedRequest canonical(ParsedRequest r) {
  CanonicalizationPolicy rewrite = CanonicalizationPolicy::none();
  rewrite.tool_json = rewrite.tool_order = true;
  (void)canonicalize_in_place(r, rewrite, CanonicalizationPolicy::none());
  return r;
}

Error error_of(std::string_view body) {
  auto m = parse_messages_request(body);
  EXPECT_FALSE(m) << body;
  return m ? Error{} : m.error();
}

TEST(AnthropicRequestTest, ConvertsTheAgentStepIntoTheEquivalentChatRequest) {
  const MessagesRequest m = messages(kMessages);
  EXPECT_EQ(m.model, "builtin:tiny");
  EXPECT_TRUE(m.stream);
  EXPECT_EQ(m.max_tokens, 64u);
  EXPECT_EQ(m.stop_sequences, std::vector<std::string>{"\n\nHuman:"});
  EXPECT_EQ(m.user_id, "dev-7");
  EXPECT_EQ(
      json::to_json(m.chat.body),
      R"({"model":"builtin:tiny","messages":[)"
      R"({"role":"system","content":[{"type":"text","text":"You are a coding agent."},)"
      R"({"type":"text","text":"Repository: prefixgate."}]},)"
      R"({"role":"user","content":"Where is the router?"},)"
      R"({"role":"assistant","content":"Let me look.","tool_calls":[{"id":"toolu_1","type":"function",)"
      R"("function":{"name":"grep","arguments":"{\"pattern\":\"route\",\"max\":3}"}}]},)"
      R"({"role":"tool","tool_call_id":"toolu_1","content":"gateway/src/routing.cpp"},)"
      R"({"role":"user","content":"Open it."}],)"
      R"("tools":[{"function":{"description":"Reads a file","name":"read_file","parameters":)"
      R"({"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}},"type":"function"},)"
      R"({"function":{"description":"Searches files","name":"grep","parameters":)"
      R"({"type":"object","properties":{"pattern":{"type":"string"}}}},"type":"function"}],)"
      R"("max_tokens":64,"stop":["\n\nHuman:"],"temperature":0.5,"top_k":40,"stream":true,)"
      R"("stream_options":{"include_usage":true},"user":"dev-7"})");
  // The chat request is valid as it is.
  EXPECT_EQ(chat_of(m.chat.body).messages.size(), 5u);
}

// Parsed with its source members (as the gateway parses), a Messages request's tool list is
// shared from its second sighting on (json::parse's memo), and the converted request's
// descriptions and schemas refer to it instead of copying it; a change to one stays its own.
TEST(AnthropicRequestTest, ARepeatedToolListIsConvertedWithoutCopyingItsSchemas) {
  std::vector<json::SourceMember> source;
  const auto convert = [&] {
    auto m = parse_messages_request(kMessages, RequestLimits{}, source);
    EXPECT_TRUE(m);
    return m ? std::move(*m) : MessagesRequest{};
  };
  const MessagesRequest first = convert();
  MessagesRequest second = convert();
  const MessagesRequest third = convert();
  const auto function_of = [](const MessagesRequest& m, std::size_t i) -> const json::Value& {
    return *m.chat.body.find("tools")->as_array().at(i).find("function");
  };
  ASSERT_TRUE(third.body.find("tools")->is_shared());
  const json::Value& client_tool = third.body.find("tools")->as_array()[0];
  EXPECT_TRUE(function_of(third, 0).find("parameters")->is_shared());
  EXPECT_TRUE(function_of(third, 0).find("description")->is_shared());
  EXPECT_EQ(&function_of(third, 0).find("parameters")->as_object(),
            &client_tool.find("input_schema")->as_object());
  EXPECT_EQ(json::to_json(third.chat.body), json::to_json(first.chat.body));
  // A rule that rewrites the second request's schema leaves the shared one as it was.
  json::Value& schema =
      *second.chat.body.find("tools")->as_array()[0].find("function")->find("parameters");
  schema.set("type", "string");
  EXPECT_EQ(json::to_json(*client_tool.find("input_schema")),
            R"({"type":"object","properties":{"path":{"type":"string"}},"required":["path"]})");
  EXPECT_EQ(json::to_json(third.chat.body), json::to_json(first.chat.body));
}

TEST(AnthropicRequestTest, BothShapesOfOneConversationHashToTheSameBlocks) {
  const MessagesRequest m = messages(kMessages);
  const ParsedRequest via_messages = canonical(chat_of(m.chat.body));
  auto plain_chat = parse_request(kChat, Endpoint::kChatCompletions);
  ASSERT_TRUE(plain_chat);
  const ParsedRequest via_chat = canonical(std::move(*plain_chat));
  auto tokenizer = make_byte_tokenizer();
  for (ChatTemplate t : {ChatTemplate::kLlama3, ChatTemplate::kChatml, ChatTemplate::kPlain}) {
    const PromptModel model{t, tokenizer.get(), 16, "builtin:tiny"};
    auto a = analyze_prompt(via_messages, model);
    auto b = analyze_prompt(via_chat, model);
    ASSERT_TRUE(a && b);
    EXPECT_EQ(a->rendered.text, b->rendered.text) << chat_template_name(t);
    EXPECT_EQ(a->block_hashes, b->block_hashes) << chat_template_name(t);
    EXPECT_GT(a->block_hashes.size(), 10u);
  }
}

TEST(AnthropicRequestTest, BothShapesRenderTheSameThroughAModelsJinjaTemplate) {
  // A ChatML template with tools and tool calls, rendered with vLLM's context (arguments parsed).
  auto templates = load_chat_templates(R"({"chat_template":
    "{%- if tools %}<|im_start|>system\n{%- for t in tools %}{{ t | tojson }}\n{%- endfor %}<|im_end|>\n{%- endif %}{%- for m in messages %}<|im_start|>{{ m.role }}\n{%- if m.content is string %}{{ m.content }}{%- else %}{%- for p in m.content %}{{ p.text }}{%- endfor %}{%- endif %}{%- for c in m.tool_calls or [] %}<tool_call>{{ c.function | tojson }}</tool_call>{%- endfor %}<|im_end|>\n{%- endfor %}<|im_start|>assistant\n"})");
  ASSERT_TRUE(templates) << templates.error().message;
  auto tokenizer = make_byte_tokenizer();
  const PromptModel model{ChatFormat(std::make_shared<ModelChatTemplates>(std::move(*templates))),
                          tokenizer.get(), 16, "m"};
  const MessagesRequest m = messages(kMessages);
  auto plain_chat = parse_request(kChat, Endpoint::kChatCompletions);
  ASSERT_TRUE(plain_chat);
  auto a = analyze_prompt(canonical(chat_of(m.chat.body)), model);
  auto b = analyze_prompt(canonical(std::move(*plain_chat)), model);
  ASSERT_TRUE(a && b) << (a ? b.error().message : a.error().message);
  EXPECT_EQ(a->rendered.text, b->rendered.text);
  EXPECT_EQ(a->block_hashes, b->block_hashes);
  EXPECT_NE(a->rendered.text.find("\"pattern\""), std::string::npos);
}

TEST(AnthropicRequestTest, BreakpointsEndWhereTheirBlocksEndInTheRenderedPrompt) {
  const MessagesRequest m = messages(kMessages);
  ASSERT_EQ(m.chat.breakpoints.size(), 3u);
  EXPECT_EQ(m.chat.breakpoints[0].source, "tools[1]");
  EXPECT_EQ(m.chat.breakpoints[0].tool_name, "grep");
  EXPECT_EQ(m.chat.breakpoints[1].source, "system[1]");
  EXPECT_EQ(m.chat.breakpoints[1].chat_field, "messages[0].content[1]");
  EXPECT_EQ(m.chat.breakpoints[2].source, "messages[2].content[1]");
  EXPECT_EQ(m.chat.breakpoints[2].chat_field, "messages[4].content");

  // Sorting the tools moves grep first; its breakpoint follows it by name.
  const ParsedRequest chat = canonical(chat_of(m.chat.body));
  auto tokenizer = make_byte_tokenizer();
  const PromptModel model{ChatTemplate::kChatml, tokenizer.get(), 16, "builtin:tiny"};
  auto prompt = analyze_prompt(chat, model);
  ASSERT_TRUE(prompt);
  const std::string& text = prompt->rendered.text;
  const std::vector<std::size_t> bytes = breakpoint_bytes(m.chat, chat, prompt->rendered);
  ASSERT_EQ(bytes.size(), 3u);
  const std::size_t grep_end = text.find("\"type\":\"function\"}") + 18;
  const std::size_t system_end = text.find("Repository: prefixgate.") + 23;
  const std::size_t question_end = text.find("Open it.") + 8;
  EXPECT_LT(text.find("grep"), text.find("read_file"));
  // chatml lists the tools after the system prompt's text.
  EXPECT_EQ(bytes, (std::vector<std::size_t>{system_end, grep_end, question_end}));
  // Byte tokenizer: tokens up to the last breakpoint are its bytes (specials count as one).
  const std::size_t declared = breakpoint_tokens(m.chat, chat, *prompt);
  EXPECT_EQ(prompt->tokens.byte_offsets[declared - 1], question_end - 1);
}

TEST(AnthropicRequestTest, TopLevelCacheControlMarksTheLastMessage) {
  const MessagesRequest m = messages(R"({"max_tokens": 8, "cache_control": {"type": "ephemeral"},
      "messages": [{"role": "user", "content": "one"}, {"role": "assistant", "content": "two"}]})");
  ASSERT_EQ(m.chat.breakpoints.size(), 1u);
  EXPECT_EQ(m.chat.breakpoints[0].chat_field, "messages[1]");
}

TEST(AnthropicRequestTest, WriteBackMakesTheClientBodyConvertToTheCanonicalChatBody) {
  MessagesRequest m = messages(R"({"max_tokens": 8,
      "system": "Now: 2026-08-20T14:33:07Z. Be brief.",
      "tools": [{"name": "zeta", "input_schema": {"type": "object", "properties": {}}},
                {"name": "alpha", "description": "as of 2026-08-20 14:33", "input_schema":
                 {"required": ["x"], "type": "object", "properties": {"x": {"type": "number", "minimum": 1.50}}}}],
      "messages": [{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}]})");
  CanonicalizationPolicy rewrite;  // every rule, whitespace off
  ParsedRequest chat = chat_of(m.chat.body);
  const std::vector<Change> changes =
      canonicalize_in_place(chat, rewrite, CanonicalizationPolicy::none());
  EXPECT_GE(changes.size(), 3u);  // tool-json, tool-order, timestamps
  write_back(m.chat, chat, m.body);
  const MessagesRequest again = messages(json::to_json(m.body));
  EXPECT_EQ(json::to_json(again.chat.body), json::to_json(chat.body));
  EXPECT_EQ(json::to_json(*m.body.find("system")), R"("Now: 2026-08-20T14:00:00Z. Be brief.")");
}

TEST(AnthropicRequestTest, SourceFieldNamesTheClientsField) {
  const MessagesRequest m = messages(kMessages);
  EXPECT_EQ(source_field(m.chat, "messages[0].content[1]"), "system[1].text");
  EXPECT_EQ(source_field(m.chat, "messages[2].content"), "messages[1].content[0].text");
  EXPECT_EQ(source_field(m.chat, "messages[2].tool_calls[0].function.arguments"),
            "messages[1].content[1]");
  EXPECT_EQ(source_field(m.chat, "messages[3].content"), "messages[2].content[0].content");
  EXPECT_EQ(source_field(m.chat, "messages[4].content"), "messages[2].content[1].text");
  EXPECT_EQ(source_field(m.chat, "tools[1]"), "tools[1]");
  EXPECT_EQ(source_field(m.chat, "template"), "template");
}

TEST(AnthropicRequestTest, ImagesBecomeImageUrlPartsAndThinkingIsDropped) {
  const MessagesRequest m = messages(R"({"max_tokens": 8, "messages": [
      {"role": "user", "content": [{"type": "text", "text": "what is it?"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAA"}}]},
      {"role": "assistant", "content": [{"type": "thinking", "thinking": "hmm", "signature": "s"},
                                        {"type": "text", "text": "a cat"}]},
      {"role": "user", "content": [{"type": "image", "source": {"type": "url", "url": "https://x/y.png"}}]}]})");
  EXPECT_EQ(
      json::to_json(*m.chat.body.find("messages")),
      R"([{"role":"user","content":[{"type":"text","text":"what is it?"},)"
      R"({"type":"image_url","image_url":{"url":"data:image/png;base64,AAA"}}]},)"
      R"({"role":"assistant","content":"a cat"},)"
      R"({"role":"user","content":[{"type":"image_url","image_url":{"url":"https://x/y.png"}}]}])");
}

TEST(AnthropicRequestTest, ToolChoiceMapsToItsChatEquivalent) {
  const auto choice = [](std::string_view tc) {
    const MessagesRequest m = messages(
        std::string(
            R"({"max_tokens":1,"messages":[{"role":"user","content":"x"}],"tool_choice":)") +
        std::string(tc) + "}");
    json::Value out(json::Object{});
    if (const json::Value* v = m.chat.body.find("tool_choice")) out.set("tool_choice", *v);
    if (const json::Value* v = m.chat.body.find("parallel_tool_calls")) out.set("parallel", *v);
    return json::to_json(out);
  };
  EXPECT_EQ(choice(R"({"type":"auto"})"), R"({"tool_choice":"auto"})");
  EXPECT_EQ(choice(R"({"type":"any","disable_parallel_tool_use":true})"),
            R"({"tool_choice":"required","parallel":false})");
  EXPECT_EQ(choice(R"({"type":"tool","name":"grep"})"),
            R"({"tool_choice":{"type":"function","function":{"name":"grep"}}})");
  EXPECT_EQ(choice(R"({"type":"none"})"), R"({"tool_choice":"none"})");
}

TEST(AnthropicRequestTest, InvalidRequestsAreRefusedNamingTheField) {
  struct Case {
    std::string_view body;
    ErrorCode code;
    std::string_view param;
  };
  const Case cases[] = {
      {R"({"messages":[{"role":"user","content":"x"}]})", ErrorCode::kMissingField, "max_tokens"},
      {R"({"max_tokens":"8","messages":[{"role":"user","content":"x"}]})", ErrorCode::kWrongType,
       "max_tokens"},
      {R"({"max_tokens":0,"messages":[{"role":"user","content":"x"}]})", ErrorCode::kUnsupported,
       "max_tokens"},
      {R"({"max_tokens":8})", ErrorCode::kMissingField, "messages"},
      {R"({"max_tokens":8,"messages":[]})", ErrorCode::kInvalidValue, "messages"},
      {R"({"max_tokens":8,"messages":[{"role":"tool","content":"x"}]})", ErrorCode::kInvalidValue,
       "messages[0].role"},
      {R"({"max_tokens":8,"messages":[{"role":"user","content":[{"type":"text"}]}]})",
       ErrorCode::kMissingField, "messages[0].content[0].text"},
      {R"({"max_tokens":8,"messages":[{"role":"user","content":[{"type":"document","source":{}}]}]})",
       ErrorCode::kUnsupported, "messages[0].content[0].type"},
      {R"({"max_tokens":8,"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f","input":"{}"}]}]})",
       ErrorCode::kWrongType, "messages[0].content[0].input"},
      {R"({"max_tokens":8,"messages":[{"role":"user","content":[{"type":"tool_result"}]}]})",
       ErrorCode::kMissingField, "messages[0].content[0].tool_use_id"},
      {R"({"max_tokens":8,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"image","source":{"type":"url","url":"u"}}]}]}]})",
       ErrorCode::kUnsupported, "messages[0].content[0].content[0]"},
      {R"({"max_tokens":8,"messages":[{"role":"user","content":"x"}],"tools":[{"name":"f"}]})",
       ErrorCode::kMissingField, "tools[0].input_schema"},
      {R"({"max_tokens":8,"messages":[{"role":"user","content":"x"}],"tools":[{"type":"bash_20250124","name":"bash"}]})",
       ErrorCode::kUnsupported, "tools[0].type"},
      {R"({"max_tokens":8,"messages":[{"role":"user","content":"x"}],"tools":[{"name":"f","input_schema":{}},{"name":"f","input_schema":{}}]})",
       ErrorCode::kInvalidValue, "tools[1].name"},
      {R"({"max_tokens":8,"messages":[{"role":"user","content":"x"}],"tool_choice":{"type":"tool"}})",
       ErrorCode::kMissingField, "tool_choice.name"},
      {R"({"max_tokens":8,"messages":[{"role":"user","content":"x"}],"temperature":1.5})",
       ErrorCode::kInvalidValue, "temperature"},
      {R"({"max_tokens":8,"messages":[{"role":"user","content":"x"}],"stop_sequences":[1]})",
       ErrorCode::kWrongType, "stop_sequences[0]"},
      {R"({"max_tokens":8,"messages":[{"role":"user","content":"x"}],"system":[{"type":"text","text":"s","cache_control":true}]})",
       ErrorCode::kWrongType, "system[0].cache_control"},
      {R"([1])", ErrorCode::kWrongType, "(body)"},
  };
  for (const Case& c : cases) {
    const Error e = error_of(c.body);
    EXPECT_EQ(e.code, c.code) << c.body << ": " << e.message;
    EXPECT_EQ(e.param, c.param) << c.body << ": " << e.message;
    EXPECT_NE(e.message.find(std::string(c.param)), std::string::npos) << e.message;
  }
}

TEST(AnthropicRequestTest, GuessApiTellsTheShapesApart) {
  const auto guess = [](std::string_view body) { return guess_api(*json::parse(body)); };
  EXPECT_EQ(guess(kMessages), Api::kMessages);
  EXPECT_EQ(guess(kChat), Api::kChatCompletions);
  EXPECT_EQ(guess(R"({"input":"hi","instructions":"x"})"), Api::kResponses);
  EXPECT_EQ(guess(R"({"prompt":"hi"})"), Api::kCompletions);
  EXPECT_EQ(
      guess(
          R"({"max_tokens":8,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t"}]}]})"),
      Api::kMessages);
  EXPECT_EQ(guess(R"({"model":"x"})"), std::nullopt);
  EXPECT_EQ(api_for_path("/v1/messages"), Api::kMessages);
  EXPECT_EQ(api_for_path("/v1/messages/count_tokens"), std::nullopt);
}

}  // namespace
}  // namespace prefixgate::canon
