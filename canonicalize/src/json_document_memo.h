// The thread's memo of request bodies json::parse read lately, so that a body that begins with
// the bytes of one of them (an agent's next turn: the same conversation, one turn longer) is
// parsed from its last element in common on. Even with every earlier turn's tree kept
// (json_element_memo.h), simdjson still passed over every byte of the body (stage 1) and the
// parser found and skipped every kept turn: on a 30 KB conversation most of its parse.
//
// What is remembered of a body: its bytes, its root members before its element list
// (MemoKeys::elements: `messages`, Responses `input`) and that list's leading elements, with the
// offset of the ',' after each. A new body that shares its bytes up to such a ',' (compared with
// memcmp) is parsed as `{"<list key>":[0,` followed by its bytes after the ',': the remembered
// members and elements are taken as they were, the placeholder 0 dropped, and the rest parsed as
// usual, its offsets moved back to the body's. Exact because JSON reads left to right: equal bytes
// up to a ',' between two elements are the same tokens, already checked once (syntax, UTF-8,
// depth under the same limit), and the text after it is checked now, as it would be in the whole
// body; a key after the list that repeats one before it, or anything that fails, sends the body
// through the whole parse, for its exact error.
//
// The members after the list (a chat's `tools`, `max_tokens`) are remembered too, with where the
// list's closing ']' lies counted from the body's end: a body that also ends with the
// remembered bytes from that ']' on (the same tools, a new last message) is parsed only between
// the ',' and the ']', as `{"<list key>":[0,` + those bytes + `]}`, and takes the members after
// the list as they were. Exact for the same reason: the bytes before the ',' and from the ']' on
// are the remembered body's, read in the same state (inside the list after an element, then
// after the list), and the bytes between them are checked now as the list's elements.
//
// Bounds: kEntries bodies of at most kMaxTextBytes; an element is remembered only when it is a
// tree the element memo keeps (counted by that tree's bytes) or too small for it (its own tree,
// counted by approx_tree_bytes), at most kMaxTreeBytes of trees a body: an element that the
// element memo has only noted is not, so that its next sighting reaches the element memo and is
// kept there, and not copied out of this memo into every body after. A body whose members before
// the list are large, kept trees or many is not remembered.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "prefixgate/canonicalize/json.h"

namespace prefixgate::json::internal {

// What a parse met of the root's first element list: its index among the root's members and
// its elements.
struct ElementListSeen {
  static constexpr std::size_t kNoComma = static_cast<std::size_t>(-1);
  struct Element {
    std::size_t comma = kNoComma;  // offset of the ',' after it; none after the last
    // Its tree's bytes: of the tree it took from or gave to the element memo as parsed (0: a
    // tree of its own), and as remembered, of its own small tree too.
    std::size_t tree_bytes = 0;
    bool small = false;  // fewer bytes than the element memo keeps
  };
  bool found = false;
  std::size_t member = 0;
  std::vector<Element> elements;
};

class DocumentMemo {
 public:
  static constexpr std::size_t kEntries = 8;
  static constexpr std::size_t kMaxTextBytes = std::size_t{512} << 10;
  static constexpr std::size_t kMaxTreeBytes = std::size_t{2} << 20;
  // An element or member with a tree of its own is remembered up to this size.
  static constexpr std::size_t kMaxOwnTreeBytes = std::size_t{8} << 10;
  static constexpr std::size_t kMaxHeadMembers = 32;
  // A kept tool list before the list is counted at this many bytes of tree a byte of its text
  // (JSON schemas' trees run two to four times their text).
  static constexpr std::size_t kSharedTreePerByte = 8;

  static DocumentMemo& for_this_thread();

  struct Entry {
    std::uint64_t used = 0;  // 0: empty
    std::size_t max_depth = 0;
    std::uint64_t keys = 0;  // MemoKeys, hashed
    std::string text;
    // The root members before the list, then the list holding its remembered elements.
    Object head;
    std::vector<MemberSpan> head_spans;  // of head's members; the list's: its begin only
    std::size_t head_tree_bytes = 0;     // of the members before the list
    std::vector<ElementListSeen::Element> elements;  // the remembered ones, as met
    // The members after the list, their values' offsets counted back from the text's end, and
    // the list's closing ']' at tail_from_end bytes from the end; 0: not remembered.
    Object tail;
    std::vector<MemberSpan> tail_spans_from_end;
    std::size_t tail_from_end = 0;
  };
  // Where a body may pick up: `elements` of the entry's list taken, the ',' after the last of
  // them at `comma`.
  struct Resume {
    Entry* entry = nullptr;
    std::size_t elements = 0;
    std::size_t comma = 0;
    std::size_t shared_bytes = 0;
  };

  // The remembered body sharing the most leading bytes with `text`, parsed under `max_depth`
  // and `keys`, and its last ',' among them; none when no body shares one.
  std::optional<Resume> find(std::string_view text, std::size_t max_depth, std::uint64_t keys);

  // Remembers `text`, parsed into `root` (an object) with `spans` and `list`, replacing
  // `resumed.entry` when the body shares most of it, else the least recently used body.
  // `joined`: `root` was joined to `resumed` (its members before the list and first elements
  // are the entry's).
  void remember(std::string_view text, std::size_t max_depth, const MemoKeys& memo_keys,
                std::uint64_t keys, const Value& root, const std::vector<MemberSpan>& spans,
                const ElementListSeen& list, const std::optional<Resume>& resumed, bool joined);

  // Bodies parsed from a remembered one on (tests, benchmarks).
  std::size_t resumes() const { return resumes_; }
  // Of them, those that also took the members after the list.
  std::size_t tail_resumes() const { return tail_resumes_; }
  void count_resume(bool tail) {
    ++resumes_;
    if (tail) ++tail_resumes_;
  }

  // Forgets everything (tests).
  void clear();

 private:
  std::array<Entry, kEntries> entries_;
  std::uint64_t clock_ = 0;
  std::size_t resumes_ = 0;
  std::size_t tail_resumes_ = 0;
  std::vector<ElementListSeen::Element> scratch_;
};

// The MemoKeys' lists, hashed: bodies parsed under other keys are not taken for each other.
std::uint64_t memo_keys_hash(const MemoKeys& keys);

}  // namespace prefixgate::json::internal
