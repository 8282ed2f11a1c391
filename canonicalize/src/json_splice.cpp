#include "prefixgate/canonicalize/json_splice.h"

#include <functional>  // std::less_equal

namespace prefixgate::json {
namespace {

// The source text a member is written as: nullptr when it has none or a rule rewrote it.
const std::string_view* source_text(const std::string& key, const std::vector<SourceMember>& source,
                                    const std::vector<std::string_view>& rewritten) {
  for (const std::string_view r : rewritten) {
    if (r == key) return nullptr;
  }
  for (const SourceMember& s : source) {
    if (s.key == key) return &s.text;
  }
  return nullptr;
}

// Writes `object` reusing source texts; `splice(text)` takes a text out of `out` when it returns
// true (it records where the text goes instead).
template <class Splice>
void write_reusing(const Value& object, const std::vector<SourceMember>& source,
                   const std::vector<std::string_view>& rewritten, std::string& out,
                   Splice&& splice) {
  if (!object.is_object()) {
    append_json(object, out);
    return;
  }
  out += '{';
  bool first = true;
  for (const Member& m : object.as_object()) {
    if (!first) out += ',';
    first = false;
    append_quoted(m.key, out);
    out += ':';
    if (const std::string_view* text = source_text(m.key, source, rewritten)) {
      if (!splice(*text)) out += *text;
    } else {
      append_json(m.value, out);
    }
  }
  out += '}';
}

bool within(std::string_view inner, std::string_view outer) {
  const std::less_equal<const char*> le;
  return !outer.empty() && le(outer.data(), inner.data()) &&
         le(inner.data() + inner.size(), outer.data() + outer.size());
}

}  // namespace

SplicedJson SplicedJson::borrowing(std::string_view whole) {
  SplicedJson out;
  out.splices[0] = Splice{.at = 0, .source = whole};
  out.splice_count = 1;
  return out;
}

std::size_t SplicedJson::size() const {
  std::size_t n = text.size();
  for (std::size_t i = 0; i < splice_count; ++i) n += splices[i].source.size();
  return n;
}

std::string SplicedJson::flattened() const {
  std::string out;
  out.reserve(size());
  for_each_piece([&](std::string_view piece) { out += piece; });
  return out;
}

void append_json_reusing(const Value& object, const std::vector<SourceMember>& source,
                         const std::vector<std::string_view>& rewritten, std::string& out) {
  write_reusing(object, source, rewritten, out, [](std::string_view) { return false; });
}

void append_json_spliced(const Value& object, const std::vector<SourceMember>& source,
                         const std::vector<std::string_view>& rewritten, std::string_view stable,
                         SplicedJson& out) {
  // What is written around the spliced pieces is a request's small members, their keys and the
  // pieces too short to splice: room for them at once, not a growth every few members.
  constexpr std::size_t kUsualWrittenBytes = 512;
  out.text.reserve(out.text.size() + kUsualWrittenBytes);
  write_reusing(object, source, rewritten, out.text, [&](std::string_view text) {
    if (out.splice_count == SplicedJson::kMaxSplices ||
        text.size() < SplicedJson::kMinSpliceBytes || !within(text, stable)) {
      return false;
    }
    out.splices[out.splice_count++] = SplicedJson::Splice{.at = out.text.size(), .source = text};
    return true;
  });
}

}  // namespace prefixgate::json
