#include "prefixgate/canonicalize/render.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <iterator>
#include <string>
#include <utility>

#include "prefixgate/base/check.h"

namespace prefixgate::canon {
namespace {

std::string_view trim(std::string_view s) {
  const auto is_space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

// Appends text while recording where it came from; adjacent pieces of one source merge.
class Builder {
 public:
  // Sized once for what `req` will render: its texts and tool lists plus each message's markup
  // (a 30 KB conversation would otherwise grow the text by doubling, copying it each time).
  // `out` keeps the room it has, its segments' sources too (each is assigned over, not made
  // anew): a thread's prompt rendered request after request allocates nothing once its text and
  // segments have grown to size.
  Builder(const ParsedRequest& req, RenderedPrompt& out) : out_(out) {
    out_.text.clear();
    constexpr std::size_t kMarkupPerMessage = 64;
    std::size_t bytes = kMarkupPerMessage;
    for (const Message& m : req.messages) {
      bytes += kMarkupPerMessage;
      for (const ContentPart& part : m.parts) bytes += part.text.size();
    }
    for (const auto& tools : req.tool_texts) bytes += tools->json.size() + kMarkupPerMessage;
    out_.text.reserve(bytes);
    // A segment for each message and each tool, and one of markup after each.
    out_.segments.reserve(2 * (req.messages.size() + req.tools.size()) + 4);
  }

  void add(std::string_view text, std::string_view source, int message_index) {
    if (appended_to_last(text, source, message_index)) return;
    next_segment(source, message_index, {}, nullptr);
  }
  // The same for `text`, bytes of the message text `from`: a segment of its own remembers them.
  void add_copied(std::string_view text, const SharedText& from, std::string_view source,
                  int message_index) {
    if (appended_to_last(text, source, message_index)) return;
    next_segment(source, message_index, from, text.data());
  }
  // Template markup: several pieces a message (its header, its end) make one segment, extended
  // without comparing sources.
  void markup(std::string_view text) {
    if (text.empty()) return;
    if (last_is_markup_) {
      out_.text.append(text);
      last().end = out_.text.size();
      return;
    }
    add(text, kMarkupSource, -1);
    last_is_markup_ = true;
  }
  std::size_t size() const { return out_.text.size(); }
  void finish(std::size_t volatile_tail_begin) {
    out_.segments.resize(used_);
    out_.volatile_tail_begin = std::min(volatile_tail_begin, out_.text.size());
  }

 private:
  Segment& last() { return out_.segments[used_ - 1]; }

  // Appends `text`; true when it needs no segment of its own (empty, or the last segment's
  // source and message continue), else the new segment starts at last_begin_.
  bool appended_to_last(std::string_view text, std::string_view source, int message_index) {
    if (text.empty()) return true;
    last_is_markup_ = false;
    last_begin_ = out_.text.size();
    out_.text.append(text);
    if (used_ > 0 && last().message_index == message_index && last().source == source) {
      Segment& seg = last();
      seg.end = out_.text.size();
      if (seg.copied_at != nullptr) {  // no longer the bytes of one text
        seg.copied_from = {};
        seg.copied_at = nullptr;
      }
      return true;
    }
    return false;
  }
  // The segment from last_begin_ to the text's end: the next place of the rendering before,
  // assigned over, or a new one.
  void next_segment(std::string_view source, int message_index, const SharedText& from,
                    const char* copied_at) {
    if (used_ == out_.segments.size()) out_.segments.emplace_back();
    Segment& seg = out_.segments[used_++];
    seg.begin = last_begin_;
    seg.end = out_.text.size();
    seg.source.assign(source);
    seg.message_index = message_index;
    seg.copied_from = from;
    seg.copied_at = copied_at;
  }

  static constexpr std::string_view kMarkupSource = "template";

  RenderedPrompt& out_;
  std::size_t used_ = 0;  // segments of this rendering; out_'s others are an earlier one's
  std::size_t last_begin_ = 0;
  bool last_is_markup_ = false;  // the last segment is markup that markup() may extend
};

// A path such as "messages[3].content" or "tools[0]", written on the stack: a rendering names
// a source for every message, and its segment takes the text over its own earlier one.
class SourcePath {
 public:
  SourcePath& text(std::string_view s) {
    const std::size_t n = std::min(s.size(), room());
    std::copy_n(s.data(), n, buf_.data() + size_);
    size_ += n;
    return *this;
  }
  SourcePath& index(std::size_t i) {
    size_ = static_cast<std::size_t>(
        std::to_chars(buf_.data() + size_, buf_.data() + buf_.size(), i).ptr - buf_.data());
    return *this;
  }
  std::string_view view() const { return {buf_.data(), size_}; }

 private:
  std::size_t room() const { return buf_.size() - size_; }
  // Ample for the paths written here: "messages[" + 20 digits + "].tool_calls[" + 20 digits
  // + "]" is 63 bytes.
  std::array<char, 96> buf_{};
  std::size_t size_ = 0;
};

// A message's content as the template renders it: text parts verbatim, other parts as their
// JSON (so a different image is a different prompt).
void add_content(Builder& b, const Message& m, bool trim_edges) {
  SourcePath path;
  path.text("messages[").index(m.index).text("].content");
  const int idx = static_cast<int>(m.index);
  if (m.parts.size() == 1 && m.parts[0].is_text()) {
    const SharedText& text = m.parts[0].text;
    b.add_copied(trim_edges ? trim(text) : text.view(), text, path.view(), idx);
    return;
  }
  for (std::size_t i = 0; i < m.parts.size(); ++i) {
    const ContentPart& part = m.parts[i];
    SourcePath part_path = path;
    part_path.text("[").index(i).text("]");
    if (part.is_text()) {
      b.add_copied(part.text, part.text, part_path.view(), idx);
    } else {
      b.add(json::to_json(part.value), part_path.view(), idx);
    }
  }
}

void add_tool_calls(Builder& b, const Message& m) {
  if (!m.tool_calls.is_array()) return;
  const json::Array& calls = m.tool_calls.as_array();
  for (std::size_t i = 0; i < calls.size(); ++i) {
    SourcePath path;
    path.text("messages[").index(m.index).text("].tool_calls[").index(i).text("]");
    const json::Value* fn = calls[i].find("function");
    if (i > 0 || !m.text().empty()) b.markup("\n");
    b.add(json::to_json(fn != nullptr ? *fn : calls[i]), path.view(), static_cast<int>(m.index));
  }
}

void add_tools(Builder& b, const ParsedRequest& req) {
  for (std::size_t i = 0; i < req.tools.size(); ++i) {
    const ToolDef& tool = req.tools[i];
    // The path is "tools[i]" or "functions[i]"; look the value up to serialize it as sent.
    const std::string_view key = tool.path.starts_with("functions") ? "functions" : "tools";
    const std::size_t pos = std::stoul(tool.path.substr(tool.path.find('[') + 1));
    // Canonicalization may have left the list's text: the same bytes, without serializing.
    const ToolListText* text = tool_list_text(req, key);
    if (text != nullptr && pos < text->items.size()) {
      b.add(text->item(pos), tool.path, -1);
    } else {
      b.add(json::to_json(req.body.find(key)->as_array()[pos]), tool.path, -1);
    }
    b.markup("\n");
  }
}

// Index of the message whose content starts the volatile tail: the last user message.
std::optional<std::size_t> last_user_message(const ParsedRequest& req) {
  for (std::size_t i = req.messages.size(); i-- > 0;) {
    if (req.messages[i].role == Role::kUser) return i;
  }
  return std::nullopt;
}

bool is_system_like(Role r) {
  return r == Role::kSystem || r == Role::kDeveloper;
}

void render_llama3(const ParsedRequest& req, RenderedPrompt& out) {
  Builder b(req, out);
  std::size_t tail = std::string::npos;
  const auto last_user = last_user_message(req);
  b.markup("<|begin_of_text|>");
  bool tools_done = req.tools.empty();
  const auto emit_tools_turn_body = [&] {
    b.markup(
        "You have access to the following functions. To call one, respond with JSON of the "
        "form {\"name\": function name, \"parameters\": arguments}.\n\n");
    add_tools(b, req);
    tools_done = true;
  };
  if (!tools_done && (req.messages.empty() || !is_system_like(req.messages[0].role))) {
    b.markup("<|start_header_id|>system<|end_header_id|>\n\n");
    emit_tools_turn_body();
    b.markup("<|eot_id|>");
  }
  for (const Message& m : req.messages) {
    const char* role = is_system_like(m.role)                                 ? "system"
                       : (m.role == Role::kTool || m.role == Role::kFunction) ? "ipython"
                                                                              : role_name(m.role);
    b.markup("<|start_header_id|>");
    b.markup(role);
    b.markup("<|end_header_id|>\n\n");
    if (last_user && m.index == *last_user) tail = b.size();
    add_content(b, m, /*trim_edges=*/true);
    if (!tools_done && is_system_like(m.role)) {
      b.markup("\n\n");
      emit_tools_turn_body();
    }
    add_tool_calls(b, m);
    b.markup("<|eot_id|>");
  }
  b.markup("<|start_header_id|>assistant<|end_header_id|>\n\n");
  b.finish(tail);
}

void render_chatml(const ParsedRequest& req, RenderedPrompt& out) {
  Builder b(req, out);
  std::size_t tail = std::string::npos;
  const auto last_user = last_user_message(req);
  bool tools_done = req.tools.empty();
  const auto emit_tools = [&] {
    b.markup(
        "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
        "You are provided with function signatures within <tools></tools> XML tags:\n"
        "<tools>\n");
    add_tools(b, req);
    b.markup("</tools>");
    tools_done = true;
  };
  if (!tools_done && (req.messages.empty() || !is_system_like(req.messages[0].role))) {
    b.markup("<|im_start|>system\n");
    emit_tools();
    b.markup("<|im_end|>\n");
  }
  for (const Message& m : req.messages) {
    b.markup("<|im_start|>");
    b.markup(is_system_like(m.role) ? "system" : role_name(m.role));
    b.markup("\n");
    if (last_user && m.index == *last_user) tail = b.size();
    add_content(b, m, /*trim_edges=*/false);
    if (!tools_done && is_system_like(m.role)) {
      b.markup("\n\n");
      emit_tools();
    }
    add_tool_calls(b, m);
    b.markup("<|im_end|>\n");
  }
  b.markup("<|im_start|>assistant\n");
  b.finish(tail);
}

void render_plain(const ParsedRequest& req, RenderedPrompt& out) {
  Builder b(req, out);
  std::size_t tail = std::string::npos;
  const auto last_user = last_user_message(req);
  if (!req.tools.empty()) {
    b.markup("tools:\n");
    add_tools(b, req);
    b.markup("\n");
  }
  for (const Message& m : req.messages) {
    b.markup(role_name(m.role));
    b.markup(": ");
    if (last_user && m.index == *last_user) tail = b.size();
    add_content(b, m, /*trim_edges=*/false);
    add_tool_calls(b, m);
    b.markup("\n\n");
  }
  b.markup("assistant:");
  b.finish(tail);
}

}  // namespace

Result<ChatTemplate> chat_template_from_name(std::string_view name) {
  if (name == "llama-3" || name == "llama3") return ChatTemplate::kLlama3;
  if (name == "chatml" || name == "qwen") return ChatTemplate::kChatml;
  if (name == "plain") return ChatTemplate::kPlain;
  return make_error(ErrorCode::kNotFound,
                    "unknown chat template '" + std::string(name) +
                        "'; built-in templates are llama-3, chatml, plain",
                    "template");
}

const char* chat_template_name(ChatTemplate tmpl) {
  switch (tmpl) {
    case ChatTemplate::kLlama3: return "llama-3";
    case ChatTemplate::kChatml: return "chatml";
    case ChatTemplate::kPlain: return "plain";
  }
  return "plain";
}

const Segment* RenderedPrompt::segment_at(std::size_t offset) const {
  auto it = std::upper_bound(segments.begin(), segments.end(), offset,
                             [](std::size_t off, const Segment& s) { return off < s.end; });
  return it == segments.end() ? nullptr : &*it;
}

RenderedPrompt render_prompt(const ParsedRequest& request, ChatTemplate tmpl) {
  RenderedPrompt p;
  render_prompt_into(request, tmpl, p);
  return p;
}

void render_prompt_into(const ParsedRequest& request, ChatTemplate tmpl, RenderedPrompt& out) {
  if (request.endpoint == Endpoint::kCompletions) {
    out.text.clear();
    out.segments.clear();
    if (!request.prompts.empty() && !request.prompts[0].is_tokens) {
      out.text = request.prompts[0].text;
      if (!out.text.empty()) out.segments.push_back(Segment{0, out.text.size(), "prompt", -1});
    }
    // A completion prompt is the client's own continuation text: no part of it is known to be
    // per-request, so all of it counts as prefix.
    out.volatile_tail_begin = out.text.size();
    return;
  }
  switch (tmpl) {
    case ChatTemplate::kLlama3: return render_llama3(request, out);
    case ChatTemplate::kChatml: return render_chatml(request, out);
    case ChatTemplate::kPlain: return render_plain(request, out);
  }
  render_plain(request, out);
}

std::size_t TokenizedPrompt::token_at_byte(std::size_t offset) const {
  PG_CHECK(byte_offsets.size() == tokens.size());
  auto it = std::upper_bound(byte_offsets.begin(), byte_offsets.end(), offset);
  if (it == byte_offsets.begin()) return 0;
  return static_cast<std::size_t>(it - byte_offsets.begin()) - 1;
}

namespace {

void tokenize_prompt_into(const RenderedPrompt& prompt, const Tokenizer& tokenizer,
                          SegmentCache* cache, TokenizedPrompt& out, ByteOffsets offsets) {
  out.tokens.clear();
  out.byte_offsets.clear();
  out.stretches.clear();
  const bool keep = offsets == ByteOffsets::kKeep;
  // At most one token per byte: one allocation each instead of a doubling series, which for
  // large prompts means fresh pages (and page faults) on every growth.
  out.tokens.reserve(prompt.text.size());
  if (keep) out.byte_offsets.reserve(prompt.text.size());
  tokenizer.encode(
      prompt.text, out.tokens,
      EncodeOptions{.parse_special = true,
                    .segment_cache = cache,
                    .stretches = offsets == ByteOffsets::kOnDemand ? &out.stretches : nullptr},
      keep ? &out.byte_offsets : nullptr);
}

}  // namespace

TokenizedPrompt tokenize_prompt(const RenderedPrompt& prompt, const Tokenizer& tokenizer,
                                SegmentCache* cache) {
  TokenizedPrompt out;
  tokenize_prompt_into(prompt, tokenizer, cache, out, ByteOffsets::kKeep);
  return out;
}

void tokenize_request_into(const ParsedRequest& request, const RenderedPrompt& prompt,
                           const Tokenizer& tokenizer, SegmentCache* cache, TokenizedPrompt& out,
                           ByteOffsets offsets) {
  out.counted = 0;  // the ids are kept
  if (has_token_prompt(request)) {
    out.tokens = request.prompts[0].token_ids;
    out.stretches.clear();
    // No text: every token maps to byte 0, whatever was asked for.
    if (offsets != ByteOffsets::kSkip) {
      out.byte_offsets.assign(out.tokens.size(), 0);
    } else {
      out.byte_offsets.clear();
    }
    return;
  }
  tokenize_prompt_into(prompt, tokenizer, cache, out, offsets);
}

TokenizedPrompt tokenize_request(const ParsedRequest& request, const RenderedPrompt& prompt,
                                 const Tokenizer& tokenizer, SegmentCache* cache) {
  TokenizedPrompt out;
  tokenize_request_into(request, prompt, tokenizer, cache, out);
  return out;
}

}  // namespace prefixgate::canon
