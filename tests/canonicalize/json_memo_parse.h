// What the JSON parser's memo tests share: a parse with its root members' spans, the check
// that a parse through a memo gives what a plain one gives (tree, text written back, spans,
// error), and the text of a turn long enough for the element memo to share it.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "prefixgate/canonicalize/json.h"

namespace prefixgate::json::memo_test {

// `tag` followed by plain words up to `bytes` (at least 128 for the element memo,
// json_element_memo.h): a turn's text, told apart from the others by its tag.
inline std::string turn_text(std::string_view tag, std::size_t bytes) {
  std::string text(tag);
  while (text.size() < bytes) text += " the tool returns a line of the file";
  return text;
}

struct SpannedParse {
  Result<Value> doc;
  std::vector<MemberSpan> spans;
};

inline SpannedParse parse_spanned(std::string_view text, const ParseLimits& limits,
                                  const MemoKeys& keys = {}) {
  SpannedParse p{Value(), {}};
  p.doc = parse(text, limits, p.spans, keys);
  return p;
}

// Returns whether both parsed.
inline bool expect_same_parse(const SpannedParse& memo, const SpannedParse& plain,
                              std::string_view text) {
  EXPECT_EQ(memo.doc.ok(), plain.doc.ok()) << text;
  if (memo.doc.ok() != plain.doc.ok()) return false;
  if (!plain.doc.ok()) {
    EXPECT_EQ(memo.doc.error().message, plain.doc.error().message) << text;
    EXPECT_EQ(memo.doc.error().param, plain.doc.error().param) << text;
    return false;
  }
  EXPECT_EQ(*memo.doc, *plain.doc) << text;
  EXPECT_EQ(to_json(*memo.doc), to_json(*plain.doc)) << text;
  EXPECT_EQ(memo.spans.size(), plain.spans.size()) << text;
  for (std::size_t i = 0; i < plain.spans.size() && i < memo.spans.size(); ++i) {
    EXPECT_EQ(memo.spans[i].begin, plain.spans[i].begin) << text;
    EXPECT_EQ(memo.spans[i].end, plain.spans[i].end) << text;
  }
  return true;
}

}  // namespace prefixgate::json::memo_test
