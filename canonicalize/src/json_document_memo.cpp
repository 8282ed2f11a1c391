#include "json_document_memo.h"

#include <algorithm>
#include <cstring>

#include "json_element_memo.h"
#include "json_subtree_memo.h"
#include "shared_prefix.h"

namespace prefixgate::json::internal {

std::uint64_t memo_keys_hash(const MemoKeys& keys) {
  // FNV-1a over a few short keys, each followed by a 0 byte and each list by a 1: ["ab"] is not
  // ["a","b"], nor the same key in the other list.
  std::uint64_t h = 0xcbf29ce484222325;
  const auto add = [&h](unsigned char byte) { h = (h ^ byte) * 0x100000001b3; };
  for (const auto list : {keys.shared, keys.elements}) {
    for (std::string_view k : list) {
      for (const char c : k) add(static_cast<unsigned char>(c));
      add(0);
    }
    add(1);
  }
  return h;
}

namespace {

constexpr std::size_t kNotKept = static_cast<std::size_t>(-1);

// What root members [begin, end) would hold of trees if a body remembered them, or kNotKept:
// small ones are copied into every body taken from the memo (counted by approx_tree_bytes, at
// most kMaxOwnTreeBytes together), a tool list the subtree memo keeps is a reference (counted at
// kSharedTreePerByte its bytes), and one that memo has only noted is not remembered, so that its
// next sighting is kept there.
std::size_t members_tree_bytes(const MemoKeys& memo_keys, const Object& members,
                               const std::vector<MemberSpan>& spans, std::size_t begin,
                               std::size_t end) {
  std::size_t shared_bytes = 0, own_bytes = 0;
  for (std::size_t i = begin; i < end; ++i) {
    const Value& value = members[i].value;
    const std::size_t bytes = spans[i].end - spans[i].begin;
    if (value.is_shared()) {
      shared_bytes += DocumentMemo::kSharedTreePerByte * bytes;
      continue;
    }
    const bool shareable = (value.is_array() || value.is_object()) &&
                           bytes >= SubtreeMemo::kMinBytes && bytes <= SubtreeMemo::kMaxBytes &&
                           std::find(memo_keys.shared.begin(), memo_keys.shared.end(),
                                     members[i].key) != memo_keys.shared.end();
    if (shareable) return kNotKept;
    own_bytes += approx_tree_bytes(value);
    if (own_bytes > DocumentMemo::kMaxOwnTreeBytes) return kNotKept;
  }
  return shared_bytes + own_bytes;
}

// members_tree_bytes() of the members after the list, or kNotKept also when their offsets
// cannot be counted from the list's closing ']'.
std::size_t tail_tree_bytes(std::string_view text, const MemoKeys& memo_keys, const Object& members,
                            const std::vector<MemberSpan>& spans, std::size_t list_member) {
  if (spans.size() != members.size()) return kNotKept;
  const std::size_t list_end = spans[list_member].end;  // one past the list's ']'
  if (list_end == 0 || list_end > text.size() || text[list_end - 1] != ']') return kNotKept;
  return members_tree_bytes(memo_keys, members, spans, list_member + 1, members.size());
}

}  // namespace

DocumentMemo& DocumentMemo::for_this_thread() {
  thread_local DocumentMemo memo;
  return memo;
}

std::optional<DocumentMemo::Resume> DocumentMemo::find(std::string_view text, std::size_t max_depth,
                                                       std::uint64_t keys) {
  Entry* best = nullptr;
  std::size_t best_shared = 0;
  for (Entry& e : entries_) {
    if (e.used == 0 || e.max_depth != max_depth || e.keys != keys) continue;
    const std::size_t s = canon::internal::shared_prefix_beyond(text, e.text, best_shared);
    if (s > best_shared) {
      best = &e;
      best_shared = s;
    }
  }
  if (best == nullptr) return std::nullopt;
  // The last remembered element whose ',' lies within the shared bytes.
  const auto after = std::lower_bound(
      best->elements.begin(), best->elements.end(), best_shared,
      [](const ElementListSeen::Element& e, std::size_t at) { return e.comma < at; });
  if (after == best->elements.begin()) return std::nullopt;
  const auto elements = static_cast<std::size_t>(after - best->elements.begin());
  return Resume{.entry = best,
                .elements = elements,
                .comma = best->elements[elements - 1].comma,
                .shared_bytes = best_shared};
}

void DocumentMemo::remember(std::string_view text, std::size_t max_depth, const MemoKeys& memo_keys,
                            std::uint64_t keys, const Value& root,
                            const std::vector<MemberSpan>& spans, const ElementListSeen& list,
                            const std::optional<Resume>& resumed, bool joined) {
  if (text.size() > kMaxTextBytes || !list.found || !root.is_object() ||
      list.member >= kMaxHeadMembers) {
    return;
  }
  const Object& members = root.as_object();
  if (list.member >= members.size() || list.member >= spans.size() ||
      !members[list.member].value.is_array()) {
    return;
  }
  const bool replacing = resumed && 2 * resumed->shared_bytes >= resumed->entry->text.size();
  // A body joined to its own entry (an agent's next turn) has that entry's members before the
  // list and its first elements: only what follows them is looked at and copied.
  const bool extending = joined && replacing;
  const std::size_t known = extending ? resumed->elements : 0;
  std::size_t head_bytes = extending ? resumed->entry->head_tree_bytes : 0;
  if (!extending) {
    const std::size_t before = members_tree_bytes(memo_keys, members, spans, 0, list.member);
    if (before == kNotKept) return;
    head_bytes += before;
    if (head_bytes > kMaxTreeBytes) return;
  }
  // The members after the list, by the same rule as those before it, within what is left.
  const std::size_t tail_bytes = tail_tree_bytes(text, memo_keys, members, spans, list.member);
  const bool keep_tail = tail_bytes != kNotKept && head_bytes + tail_bytes <= kMaxTreeBytes;
  // The leading elements followed by a ',' that are kept trees, or small trees of their own.
  const Array& items = members[list.member].value.as_array();
  const std::size_t candidates = std::min(items.size(), list.elements.size());
  std::size_t tree_bytes = head_bytes + (keep_tail ? tail_bytes : 0);
  for (std::size_t i = 0; i < known; ++i) tree_bytes += resumed->entry->elements[i].tree_bytes;
  std::vector<ElementListSeen::Element>& counted = scratch_;
  counted.clear();
  std::size_t usable = known;
  for (; usable < candidates; ++usable) {
    ElementListSeen::Element seen = list.elements[usable];
    const Value& item = items[usable];
    if (seen.comma == ElementListSeen::kNoComma) break;
    if (item.is_shared() && seen.tree_bytes > 0) {
      // a kept tree, counted by the element memo
    } else if (!item.is_shared() && seen.small) {
      seen.tree_bytes = approx_tree_bytes(item);
      if (seen.tree_bytes > kMaxOwnTreeBytes) break;
    } else {
      break;  // noted by the element memo, not kept yet: its next sighting keeps it
    }
    if (tree_bytes + seen.tree_bytes > kMaxTreeBytes) break;
    tree_bytes += seen.tree_bytes;
    counted.push_back(seen);
  }
  if (usable == 0) return;

  ++clock_;
  Entry* slot = replacing ? resumed->entry
                          : &*std::min_element(
                                entries_.begin(), entries_.end(),
                                [](const Entry& a, const Entry& b) { return a.used < b.used; });
  slot->used = clock_;
  slot->max_depth = max_depth;
  slot->keys = keys;
  if (replacing) {
    // Only what follows the shared bytes is copied: an agent's turn copies its new turn.
    slot->text.resize(std::min(resumed->shared_bytes, text.size()));
    slot->text.append(text.substr(slot->text.size()));
  } else {
    slot->text.assign(text);
  }
  if (!extending) {
    slot->head.assign(members.begin(), members.begin() + static_cast<std::ptrdiff_t>(list.member));
    slot->head.emplace_back(members[list.member].key, Value(Array()));
    slot->head_spans.assign(spans.begin(),
                            spans.begin() + static_cast<std::ptrdiff_t>(list.member + 1));
    slot->head_tree_bytes = head_bytes;
    slot->elements.clear();
  }
  Array& kept = slot->head.back().value.as_array();
  kept.resize(known);
  kept.insert(kept.end(), items.begin() + static_cast<std::ptrdiff_t>(known),
              items.begin() + static_cast<std::ptrdiff_t>(usable));
  slot->elements.resize(known);
  slot->elements.insert(slot->elements.end(), counted.begin(), counted.end());
  slot->tail.clear();
  slot->tail_spans_from_end.clear();
  slot->tail_from_end = 0;
  if (keep_tail) {
    const auto after = members.begin() + static_cast<std::ptrdiff_t>(list.member + 1);
    slot->tail.assign(after, members.end());
    for (std::size_t i = list.member + 1; i < members.size(); ++i) {
      slot->tail_spans_from_end.push_back(
          MemberSpan{text.size() - spans[i].begin, text.size() - spans[i].end});
    }
    slot->tail_from_end = text.size() - (spans[list.member].end - 1);
  }
}

void DocumentMemo::clear() {
  entries_ = {};
  clock_ = 0;
  resumes_ = 0;
  tail_resumes_ = 0;
}

}  // namespace prefixgate::json::internal
