#include "prefixgate/canonicalize/divergence.h"

#include <algorithm>

#include "prefixgate/canonicalize/volatile.h"

namespace prefixgate::canon {
namespace {

constexpr std::size_t kExcerptBytes = 40;

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

std::string excerpt_at(const std::string& text, std::size_t at) {
  if (at >= text.size()) return {};
  std::size_t n = std::min(kExcerptBytes, text.size() - at);
  // Do not cut a UTF-8 sequence in half.
  while (n < text.size() - at && (static_cast<unsigned char>(text[at + n]) & 0xC0) == 0x80) ++n;
  return text.substr(at, n);
}

// The volatile span of `text`'s segment around `offset` that covers it, if any.
const VolatileSpan* covering_span(const RenderedPrompt& p, std::size_t offset,
                                  std::vector<VolatileSpan>& storage) {
  const Segment* seg = p.segment_at(offset);
  if (seg == nullptr || seg->source == "template") return nullptr;
  storage = find_volatile(std::string_view(p.text).substr(seg->begin, seg->end - seg->begin));
  for (const VolatileSpan& s : storage) {
    if (seg->begin + s.begin <= offset && offset < seg->begin + s.end) return &s;
  }
  return nullptr;
}

bool is_tool_path(const std::string& source) {
  return source.starts_with("tools[") || source.starts_with("functions[");
}

std::vector<std::string> tool_names(const ParsedRequest& r) {
  std::vector<std::string> names;
  for (const ToolDef& t : r.tools) names.push_back(t.name);
  return names;
}

const json::Value* tool_value(const ParsedRequest& r, const std::string& path) {
  const bool legacy = path.starts_with("functions");
  const json::Value* list = r.body.find(legacy ? "functions" : "tools");
  if (list == nullptr || !list->is_array()) return nullptr;
  const std::size_t open = path.find('[');
  const std::size_t pos = std::stoul(path.substr(open + 1));
  return pos < list->as_array().size() ? &list->as_array()[pos] : nullptr;
}

DivergenceCause tool_cause(const ParsedRequest& a, const ParsedRequest& b,
                           const std::string& path) {
  std::vector<std::string> na = tool_names(a);
  std::vector<std::string> nb = tool_names(b);
  if (na != nb) {
    std::sort(na.begin(), na.end());
    std::sort(nb.begin(), nb.end());
    return na == nb ? DivergenceCause::kToolOrder : DivergenceCause::kEdit;
  }
  const json::Value* ta = tool_value(a, path);
  const json::Value* tb = tool_value(b, path);
  if (ta != nullptr && tb != nullptr && json::canonicalized(*ta) == json::canonicalized(*tb)) {
    return DivergenceCause::kKeyOrder;
  }
  return DivergenceCause::kEdit;
}

// Only whitespace differs here: at least one side has whitespace at the divergence, and after
// skipping whitespace runs both texts go on with the same bytes for a while (or both end).
bool whitespace_only(const std::string& a, const std::string& b, std::size_t at) {
  const bool space_a = at < a.size() && is_space(a[at]);
  const bool space_b = at < b.size() && is_space(b[at]);
  if (!space_a && !space_b) return false;
  std::size_t i = at, j = at;
  for (std::size_t matched = 0; matched < 32; ++matched, ++i, ++j) {
    while (i < a.size() && is_space(a[i])) ++i;
    while (j < b.size() && is_space(b[j])) ++j;
    if (i >= a.size() || j >= b.size()) return i >= a.size() && j >= b.size();
    if (a[i] != b[j]) return false;
  }
  return true;
}

}  // namespace

const char* cause_name(DivergenceCause cause) {
  switch (cause) {
    case DivergenceCause::kNone: return "none";
    case DivergenceCause::kTimestamp: return "timestamp";
    case DivergenceCause::kId: return "id";
    case DivergenceCause::kKeyOrder: return "key-order";
    case DivergenceCause::kToolOrder: return "tool-order";
    case DivergenceCause::kWhitespace: return "whitespace";
    case DivergenceCause::kEdit: return "edit";
  }
  return "edit";
}

Divergence compare_analyzed(const ParsedRequest& old_request, const AnalyzedPrompt& old_prompt,
                            const ParsedRequest& new_request, const AnalyzedPrompt& new_prompt) {
  Divergence d;
  const std::string& a = old_prompt.rendered.text;
  const std::string& b = new_prompt.rendered.text;
  d.common_prefix_tokens = common_prefix_length(old_prompt.tokens.tokens, new_prompt.tokens.tokens);
  d.new_stable_prefix_tokens = new_prompt.stable_prefix_tokens();
  // What the old prompt could have supplied from cache: its tokens, up to the new stable prefix.
  const std::size_t reusable =
      std::min(old_prompt.tokens.tokens.size(), d.new_stable_prefix_tokens);
  const std::size_t n = std::min(a.size(), b.size());
  const std::size_t at = static_cast<std::size_t>(
      std::mismatch(a.begin(), a.begin() + static_cast<std::ptrdiff_t>(n), b.begin()).first -
      a.begin());
  const bool token_prefix = d.common_prefix_tokens == old_prompt.tokens.tokens.size() ||
                            d.common_prefix_tokens == new_prompt.tokens.tokens.size();
  if ((at == n && !a.empty() && !b.empty()) || (a.empty() && b.empty() && token_prefix)) {
    return d;  // equal, or one extends the other
  }
  d.diverged = true;
  d.prefix_tokens_lost = reusable > d.common_prefix_tokens ? reusable - d.common_prefix_tokens : 0;
  d.byte_offset = at;
  d.token_index = d.common_prefix_tokens;
  d.block_index = d.token_index / std::max<std::size_t>(1, new_prompt.block_size);
  const Segment* seg = new_prompt.rendered.segment_at(at);
  if (seg == nullptr) seg = old_prompt.rendered.segment_at(at);
  d.field = seg != nullptr ? seg->source : "prompt";
  d.old_excerpt = excerpt_at(a, at);
  d.new_excerpt = excerpt_at(b, at);

  if (a.empty() && b.empty()) {  // token-id prompts: nothing to classify by
    d.cause = DivergenceCause::kEdit;
    return d;
  }
  const Segment* old_seg = old_prompt.rendered.segment_at(at);
  if (is_tool_path(d.field) || (old_seg != nullptr && is_tool_path(old_seg->source))) {
    d.cause =
        tool_cause(old_request, new_request, is_tool_path(d.field) ? d.field : old_seg->source);
    return d;
  }
  std::vector<VolatileSpan> old_spans, new_spans;
  const VolatileSpan* vs = covering_span(new_prompt.rendered, at, new_spans);
  if (vs == nullptr) vs = covering_span(old_prompt.rendered, at, old_spans);
  if (vs != nullptr) {
    d.cause = vs->rule == Rule::kId ? DivergenceCause::kId : DivergenceCause::kTimestamp;
    return d;
  }
  d.cause = whitespace_only(a, b, at) ? DivergenceCause::kWhitespace : DivergenceCause::kEdit;
  return d;
}

Result<Divergence> compare_prompts(const ParsedRequest& old_request,
                                   const ParsedRequest& new_request, const PromptModel& model,
                                   const CanonicalizationPolicy& policy,
                                   const ChatRenderOptions& options) {
  auto old_prompt = analyze_prompt(old_request, model, options);
  if (!old_prompt) return old_prompt.error();
  auto new_prompt = analyze_prompt(new_request, model, options);
  if (!new_prompt) return new_prompt.error();
  Divergence d = compare_analyzed(old_request, *old_prompt, new_request, *new_prompt);

  const auto canonical = [&](const ParsedRequest& r) {
    auto req = parse_request_value(canonicalize(r, policy).body, r.endpoint);
    return req ? std::move(*req) : r;  // canonicalization keeps a valid request valid
  };
  const ParsedRequest old_canon = canonical(old_request);
  const ParsedRequest new_canon = canonical(new_request);
  auto old_cp = analyze_prompt(old_canon, model, options);
  if (!old_cp) return old_cp.error();
  auto new_cp = analyze_prompt(new_canon, model, options);
  if (!new_cp) return new_cp.error();
  d.canonical_common_prefix_tokens =
      common_prefix_length(old_cp->tokens.tokens, new_cp->tokens.tokens);
  d.canonicalization_keeps_prefix =
      d.canonical_common_prefix_tokens >= new_cp->stable_prefix_tokens();
  return d;
}

}  // namespace prefixgate::canon
