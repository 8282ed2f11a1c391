// canon::load_chat_templates, chat_template_context and render_prompt(request, templates):
// a model's files become templates, a chat request becomes the context vLLM renders, and the
// rendered prompt says which bytes came from which request field.
#include <gtest/gtest.h>

#include <string>

#include "prefixgate/canonicalize/chat_template.h"

namespace prefixgate::canon {
namespace {

ParsedRequest chat(std::string_view body) {
  auto r = parse_request(body, Endpoint::kChatCompletions);
  EXPECT_TRUE(r.ok()) << r.error().message;
  return r.ok() ? std::move(*r) : ParsedRequest{};
}

ModelChatTemplates model(std::string_view tmpl) {
  json::Value config = json::Object{};
  config.set("bos_token", "<s>");
  config.set("eos_token", json::Object{{"content", "</s>"}, {"lstrip", false}});
  config.set("chat_template", tmpl);
  auto m = load_chat_templates(json::to_json(config));
  EXPECT_TRUE(m.ok()) << m.error().message;
  return m.ok() ? std::move(*m) : ModelChatTemplates{};
}

std::string rendered(const ParsedRequest& request, const ModelChatTemplates& templates,
                     const ChatRenderOptions& options = {}) {
  auto p = render_prompt(request, templates, options);
  if (!p) return "ERROR: " + p.error().message;
  return p->text;
}

TEST(ChatTemplateTest, LoadsSpecialTokensFromStringsAndAddedTokens) {
  const ModelChatTemplates m = model("{{ bos_token }}|{{ eos_token }}|{{ unk_token is defined }}");
  EXPECT_EQ(rendered(chat(R"({"messages":[{"role":"user","content":"x"}]})"), m), "<s>|</s>|False");
}

TEST(ChatTemplateTest, ChatTemplateJinjaReplacesTheConfigsTemplate) {
  auto m = load_chat_templates(R"({"chat_template": "from config"})", "from file");
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(rendered(chat(R"({"messages":[{"role":"user","content":"x"}]})"), *m), "from file");
  // The file alone is enough: models like GPT-OSS ship no chat_template in the config.
  m = load_chat_templates(R"({"eos_token": "<|return|>"})", "{{ eos_token }}");
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(rendered(chat(R"({"messages":[{"role":"user","content":"x"}]})"), *m), "<|return|>");
}

TEST(ChatTemplateTest, NamedTemplatesPickToolUseForRequestsWithTools) {
  auto m = load_chat_templates(
      R"({"chat_template": [{"name": "default", "template": "plain"},
                            {"name": "rag", "template": "{% include 'x' %}"},
                            {"name": "tool_use", "template": "tools: {{ tools|length }}"}]})");
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_EQ(rendered(chat(R"({"messages":[{"role":"user","content":"x"}]})"), *m), "plain");
  EXPECT_EQ(rendered(chat(R"({"messages":[{"role":"user","content":"x"}],
                              "tools":[{"type":"function","function":{"name":"f"}}]})"),
                     *m),
            "tools: 1");
}

TEST(ChatTemplateTest, LoaderErrors) {
  auto none = load_chat_templates(R"({"bos_token": "<s>"})");
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.error().code, ErrorCode::kNotFound);
  auto bad_json = load_chat_templates("{");
  ASSERT_FALSE(bad_json.ok());
  EXPECT_EQ(bad_json.error().code, ErrorCode::kInvalidJson);
  auto syntax = load_chat_templates(R"({"chat_template": "{% if %}"})");
  ASSERT_FALSE(syntax.ok());
  EXPECT_EQ(syntax.error().code, ErrorCode::kInvalidValue);
  EXPECT_EQ(syntax.error().param, "chat_template");
  auto no_default =
      load_chat_templates(R"({"chat_template": [{"name": "tool_use", "template": "t"}]})");
  ASSERT_FALSE(no_default.ok());
  EXPECT_EQ(no_default.error().code, ErrorCode::kNotFound);
}

// The context follows vLLM's chat_utils: parts joined with "\n", null content "", tool-call
// arguments parsed ({} when not JSON), empty tool_calls dropped, tools as model_dump() orders
// them, chat_template_kwargs merged, add_generation_prompt from the request.
TEST(ChatTemplateTest, ContextIsWhatVllmRenders) {
  const ModelChatTemplates m = model(
      "{{ messages|tojson }}\n{{ tools|tojson }}\n{{ add_generation_prompt }} {{ enable_thinking "
      "}}");
  const ParsedRequest request = chat(R"({
    "messages": [
      {"role": "system", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
      {"role": "user", "content": "hi", "name": "ann"},
      {"role": "assistant", "content": null, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{\"x\": 1.0, \"y\": [true, null]}"}},
        {"id": "c2", "type": "function", "function": {"name": "g", "arguments": "not json"}}]},
      {"role": "tool", "tool_call_id": "c1", "content": "42"},
      {"role": "assistant", "content": "done", "tool_calls": []}
    ],
    "tools": [{"type": "function", "function": {"parameters": {"type": "object"}, "name": "f", "strict": true}}],
    "add_generation_prompt": false,
    "chat_template_kwargs": {"enable_thinking": false}
  })");
  EXPECT_EQ(
      rendered(request, m),
      R"([{"role": "system", "content": "a\nb"}, {"role": "user", "content": "hi", "name": "ann"}, )"
      R"({"role": "assistant", "content": "", "tool_calls": [)"
      R"({"id": "c1", "type": "function", "function": {"name": "f", "arguments": {"x": 1.0, "y": [true, null]}}}, )"
      R"({"id": "c2", "type": "function", "function": {"name": "g", "arguments": {}}}]}, )"
      R"({"role": "tool", "content": "42", "tool_call_id": "c1"}, {"role": "assistant", "content": "done"}])"
      "\n"
      R"([{"type": "function", "function": {"name": "f", "description": null, "parameters": {"type": "object"}, "strict": true}}])"
      "\nFalse False");
  // Without tools, `tools` is none; add_generation_prompt defaults to true.
  EXPECT_EQ(rendered(chat(R"({"messages":[{"role":"user","content":"x"}]})"),
                     model("{{ tools is none }} {{ add_generation_prompt }}")),
            "True True");
}

TEST(ChatTemplateTest, TemplatesThatLoopOverContentGetParts) {
  const ModelChatTemplates m = model(
      "{% for m in messages %}{% for p in m['content'] %}[{{ p.type }}:{{ p.text }}]{% endfor %}"
      "{% endfor %}");
  const ParsedRequest request = chat(R"({"messages": [
      {"role": "user", "content": "plain"},
      {"role": "user", "content": [{"type": "text", "text": "one"},
                                   {"type": "image_url", "image_url": {"url": "http://x/y.png"}},
                                   {"type": "text", "text": "two"}]}]})");
  EXPECT_EQ(rendered(request, m), "[text:plain][text:one][text:two]");
  // A template that does not loop over content gets strings, parts joined with "\n".
  EXPECT_EQ(rendered(request, model("{% for m in messages %}<{{ m.content }}>{% endfor %}")),
            "<plain><one\ntwo>");
  ChatRenderOptions as_string;
  as_string.content_format = ContentFormat::kString;
  EXPECT_EQ(rendered(request,
                     model("{% for m in messages %}<{{ m['content'] }}>{% endfor %}"
                           "{% for p in [] %}{% endfor %}"),
                     as_string),
            "<plain><one\ntwo>");
}

TEST(ChatTemplateTest, SegmentsNameTheFieldsAndTheVolatileTail) {
  const ModelChatTemplates m = model(
      "{{ bos_token }}{% for message in messages %}<|{{ message['role'] }}|>"
      "{{ message['content'] | trim }}<|end|>{% endfor %}{% if tools %}{{ tools[0] | tojson }}{% "
      "endif %}"
      "{% if add_generation_prompt %}<|assistant|>{% endif %}");
  const ParsedRequest request = chat(R"({"messages": [
      {"role": "system", "content": "  be brief  "},
      {"role": "user", "content": "first"},
      {"role": "assistant", "content": "ok"},
      {"role": "user", "content": "second question"}],
      "tools": [{"type": "function", "function": {"name": "f"}}]})");
  auto p = render_prompt(request, m);
  ASSERT_TRUE(p.ok()) << p.error().message;
  const std::string tool_json =
      R"({"type": "function", "function": {"name": "f", "description": null, "parameters": null}})";
  EXPECT_EQ(p->text,
            "<s><|system|>be brief<|end|><|user|>first<|end|><|assistant|>ok<|end|>"
            "<|user|>second question<|end|>" +
                tool_json + "<|assistant|>");
  // Segments cover the text in order, without gaps.
  std::size_t pos = 0;
  for (const Segment& s : p->segments) {
    EXPECT_EQ(s.begin, pos);
    EXPECT_LT(s.begin, s.end);
    pos = s.end;
  }
  EXPECT_EQ(pos, p->text.size());
  const std::size_t sys = p->text.find("be brief");
  const Segment* seg = p->segment_at(sys);
  ASSERT_NE(seg, nullptr);
  EXPECT_EQ(seg->source, "messages[0].content");
  EXPECT_EQ(seg->message_index, 0);
  EXPECT_EQ(seg->begin, sys);
  EXPECT_EQ(seg->end, sys + 8);  // trimmed: the spaces are not in the prompt
  EXPECT_EQ(p->segment_at(0)->source, "template");
  EXPECT_EQ(p->segment_at(p->text.find("\"function\""))->source, "tools[0]");
  EXPECT_EQ(p->volatile_tail_begin, p->text.find("second question"));
}

TEST(ChatTemplateTest, RaisedErrorsAreBadRequests) {
  const ModelChatTemplates m = model(
      "{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
      "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}"
      "{% endif %}{% endfor %}");
  auto p = render_prompt(
      chat(R"({"messages":[{"role":"user","content":"a"},{"role":"user","content":"b"}]})"), m);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.error().code, ErrorCode::kInvalidValue);
  EXPECT_EQ(http_status(p.error()), 400);
  EXPECT_EQ(p.error().message,
            "Conversation roles must alternate user/assistant/user/assistant/...");
}

TEST(ChatTemplateTest, DatesComeFromTheCaller) {
  const ModelChatTemplates m = model("Today: {{ strftime_now('%d %b %Y') }}");
  EXPECT_TRUE(m.uses_strftime_now());
  EXPECT_FALSE(model("{{ messages|length }}").uses_strftime_now());
  ChatRenderOptions options;
  options.now = jinja::CivilTime{2025, 1, 2, 3, 4, 5};
  EXPECT_EQ(rendered(chat(R"({"messages":[{"role":"user","content":"x"}]})"), m, options),
            "Today: 02 Jan 2025");
  auto no_date = render_prompt(chat(R"({"messages":[{"role":"user","content":"x"}]})"), m);
  ASSERT_FALSE(no_date.ok());
  EXPECT_EQ(no_date.error().code, ErrorCode::kUnsupported);
}

TEST(ChatTemplateTest, CompletionRequestsRenderTheirPrompt) {
  auto r = parse_request(R"({"model":"m","prompt":"once upon"})", Endpoint::kCompletions);
  ASSERT_TRUE(r.ok());
  auto p = render_prompt(*r, model("unused"));
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->text, "once upon");
}

}  // namespace
}  // namespace prefixgate::canon
