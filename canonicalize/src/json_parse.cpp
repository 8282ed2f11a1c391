// json::parse: simdjson On Demand into an order-preserving json::Value tree.
//
// simdjson's stage 1 validates UTF-8 and finds the structural characters; we then walk the
// document once, recursively, copying every value out (On Demand's views die with the parser).
// What simdjson does not check for us, we check here:
//   - nesting depth (On Demand has no depth limit outside its development checks), checked
//     before each descent so a 100k-deep `[[[[...` never reaches the recursion;
//   - the number grammar (we never call get_double(): RFC 8259 section 6 is checked on the raw
//     token and the double comes from std::from_chars, so integers beyond uint64 still parse);
//   - the literals true/false/null, also on the raw token;
//   - trailing content after a scalar root, and after a container root;
//   - duplicate keys, compared after unescaping.
// simdjson 3.0.1 rejects lone surrogate escapes ("\ud800", "\udc00", "\udc00\ud800") with the
// same STRING_ERROR as a bad escape such as "\x"; on that error path we rescan the raw string to
// tell the two apart, so a lone surrogate is kInvalidUtf8 and a bad escape kInvalidJson.
#include <simdjson.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "json_document_memo.h"
#include "json_element_memo.h"
#include "json_parse_text.h"
#include "json_subtree_memo.h"
#include "prefixgate/base/check.h"
#include "prefixgate/canonicalize/json.h"

namespace prefixgate::json {
namespace {

namespace ondemand = simdjson::ondemand;
using namespace parse_text_detail;  // this parser's own helpers

// Objects with more members than this are checked for duplicates by sorting, not pairwise.
constexpr std::size_t kPairwiseDuplicateCheckMax = 32;

std::string_view raw_token(ondemand::value& node) {
  return node.raw_json_token();
}

std::string_view raw_token(ondemand::document& node) {
  std::string_view token;
  // Only fails on a dead iterator, which type() has already ruled out; an empty token then
  // fails the checks that follow.
  if (node.raw_json_token().get(token)) return {};
  return token;
}

// One key seen in the object being built: its unescaped text (a view into simdjson's string
// buffer, stable for the whole parse) and the offset of its opening quote.
struct SeenKey {
  std::string_view key;
  std::size_t offset;
};

// The keys of the objects being built, for the duplicate check: each object pushes its keys and
// pops them when it is done, so nested objects stack theirs above. Kept per thread between
// parses; a parse that left it far larger than usual gives the memory back.
struct ParseScratch {
  std::vector<SeenKey> keys;

  void trim() {
    constexpr std::size_t kKeep = 4096;
    keys.clear();
    if (keys.capacity() > kKeep) keys.shrink_to_fit();
  }
};

// The thread's ParseScratch for one build, trimmed when the build ends, also after a failed
// one, which leaves keys on the stack.
struct ThreadScratch {
  ParseScratch& scratch = for_this_thread();
  ~ThreadScratch() { scratch.trim(); }

  static ParseScratch& for_this_thread() {
    thread_local ParseScratch s;
    return s;
  }
};

// Room made for a container's first elements. Each value is built where it will stay, in its
// container's vector (no move per element); most objects in requests have one to three
// members, and a vector that grows at most doubles, so memory stays within twice the tree's.
constexpr std::size_t kFirstElements = 2;

class TreeBuilder {
 public:
  TreeBuilder(std::string_view input, const ParseLimits& limits, ondemand::document& doc,
              std::vector<MemberSpan>* root_members, const MemoKeys& memo_keys,
              ParseScratch& scratch, internal::ElementListSeen* list_seen)
      : input_(input),
        max_depth_(limits.max_depth),
        doc_(doc),
        root_members_(root_members),
        shared_keys_(memo_keys.shared),
        element_keys_(memo_keys.elements),
        list_seen_(list_seen),
        scratch_(scratch) {}

  bool build_root(Value& out) {
    ondemand::json_type type;
    if (auto err = doc_.type().get(type)) return fail_simdjson(err);
    const bool container =
        type == ondemand::json_type::array || type == ondemand::json_type::object;
    if (!container) {
      // A scalar root: simdjson's root getters check trailing content only for some types,
      // so check it here for all: only whitespace may follow the token.
      const std::string_view token = trim_trailing_whitespace(raw_token(doc_));
      const std::size_t end = offset_of(token.data()) + token.size();
      for (std::size_t i = end; i < input_.size(); ++i) {
        if (!is_json_whitespace(input_[i])) {
          return fail(ErrorCode::kInvalidJson, i,
                      describe_simdjson_error(simdjson::TRAILING_CONTENT));
        }
      }
    }
    if (!build(doc_, type, out, 0)) return false;
    if (container) {
      // OUT_OF_BOUNDS means the iterator is past the last token; anything else is more input.
      const char* location = nullptr;
      if (doc_.current_location().get(location) != simdjson::OUT_OF_BOUNDS) {
        return fail(ErrorCode::kInvalidJson, location ? offset_of(location) : input_.size(),
                    describe_simdjson_error(simdjson::TRAILING_CONTENT));
      }
    }
    return true;
  }

  Error take_error() { return std::move(error_); }

 private:
  // `depth` is the number of containers around `node`. Node is ondemand::document for the root
  // and ondemand::value below it.
  template <class Node>
  bool build(Node& node, ondemand::json_type type, Value& out, std::size_t depth) {
    switch (type) {
      case ondemand::json_type::array: return build_array(node, out, depth);
      case ondemand::json_type::object: return build_object(node, out, depth);
      case ondemand::json_type::string: return build_string(node, out);
      case ondemand::json_type::number: return build_number(raw_token(node), out);
      case ondemand::json_type::boolean:
      case ondemand::json_type::null: return build_literal(raw_token(node), out);
    }
    return fail(ErrorCode::kInvalidJson, current_offset(), "unexpected value");
  }

  // With `memo_elements`, the array's objects and arrays come from the thread's ElementMemo;
  // with `seen`, where each element ends is recorded there (json_document_memo.h).
  template <class Node>
  bool build_array(Node& node, Value& out, std::size_t depth, bool memo_elements = false,
                   internal::ElementListSeen* seen = nullptr) {
    // Checked before descending: the recursion is never deeper than max_depth.
    if (depth + 1 > max_depth_) return fail_too_deep();
    ondemand::array array;
    if (auto err = node.get_array().get(array)) return fail_simdjson(err);
    Array items;
    for (auto element : array) {
      ondemand::value child;
      if (auto err = std::move(element).get(child)) return fail_simdjson(err);
      ondemand::json_type type;
      if (auto err = child.type().get(type)) return fail_simdjson(err);
      if (items.empty()) items.reserve(kFirstElements);
      const bool container =
          type == ondemand::json_type::array || type == ondemand::json_type::object;
      kept_tree_bytes_ = 0;
      const std::size_t begin = seen != nullptr ? offset_of(raw_token(child).data()) : 0;
      if (!(memo_elements && container ? build_element(child, type, items.emplace_back(), depth + 1)
                                       : build(child, type, items.emplace_back(), depth + 1))) {
        prepend_path_index(items.size() - 1, error_.param);
        return false;
      }
      if (seen != nullptr) {
        // The iterator stands on the token after the element: its ',' or the list's ']'.
        const std::size_t at = current_offset();
        std::size_t end = std::min(at, input_.size());
        while (end > begin && is_json_whitespace(input_[end - 1])) --end;
        seen->elements.push_back({.comma = at < input_.size() && input_[at] == ','
                                               ? at
                                               : internal::ElementListSeen::kNoComma,
                                  .tree_bytes = kept_tree_bytes_,
                                  .small = end - begin < internal::ElementMemo::kMinBytes});
      }
    }
    out = Value(std::move(items));
    return true;
  }

  template <class Node>
  bool build_object(Node& node, Value& out, std::size_t depth) {
    if (depth + 1 > max_depth_) return fail_too_deep();
    ondemand::object object;
    if (auto err = node.get_object().get(object)) return fail_simdjson(err);
    // This object's keys occupy seen_keys_[base, ...); a nested object pushes its keys above
    // ours and pops them before our next key.
    const std::size_t base = seen_keys_.size();
    Object members;
    for (auto result : object) {
      ondemand::field field;
      if (auto err = std::move(result).get(field)) return fail_simdjson(err);
      const char* quote = field.key().raw() - 1;
      std::string_view key;
      if (auto err = field.unescaped_key().get(key)) {
        return fail_string(err, offset_of(quote));
      }
      seen_keys_.push_back(SeenKey{key, offset_of(quote)});
      ondemand::value& child = field.value();
      ondemand::json_type type;
      if (auto err = child.type().get(type)) return fail_simdjson(err);
      if (members.empty()) members.reserve(kFirstElements);
      Member& member = members.emplace_back(key);
      // The value's first byte. A scalar is its own token; a string or container, once built,
      // leaves the iterator on the ',' or '}' after it: the span is what lies between, less
      // trailing whitespace.
      const bool record = depth == 0 && root_members_ != nullptr;
      const bool shareable = depth == 0 && is_shared_key(key, type);
      const std::string_view token = record || shareable ? raw_token(child) : std::string_view();
      const std::size_t begin = record || shareable ? offset_of(token.data()) : 0;
      internal::SubtreeMemo::Entry* seen =
          shareable
              ? internal::SubtreeMemo::for_this_thread().find(key, max_depth_, input_.substr(begin))
              : nullptr;
      if (seen != nullptr && seen->tree != nullptr) {
        if (!skip_container(child, type, seen->bytes.size())) return false;
        member.value = Value::shared(seen->tree);
        if (record) root_members_->push_back(MemberSpan{begin, begin + seen->bytes.size()});
        continue;
      }
      const bool elements = depth == 0 && type == ondemand::json_type::array && is_element_key(key);
      internal::ElementListSeen* list_here =
          elements && list_seen_ != nullptr && !list_seen_->found ? list_seen_ : nullptr;
      if (list_here != nullptr) {
        list_here->found = true;
        list_here->member = members.size() - 1;
      }
      if (!(elements ? build_array(child, member.value, depth + 1, true, list_here)
                     : build(child, type, member.value, depth + 1))) {
        prepend_path_key(key, error_.param);
        return false;
      }
      if (record || shareable) {
        const bool scalar = type == ondemand::json_type::number ||
                            type == ondemand::json_type::boolean ||
                            type == ondemand::json_type::null;
        std::size_t end =
            scalar ? begin + trim_trailing_whitespace(token).size() : current_offset();
        while (end > begin && is_json_whitespace(input_[end - 1])) --end;
        if (record) root_members_->push_back(MemberSpan{begin, end});
        if (shareable) share(key, input_.substr(begin, end - begin), seen, member.value);
      }
      PG_DCHECK(seen_keys_.size() == base + members.size());
    }
    if (const SeenKey* duplicate = find_duplicate(base)) {
      fail(ErrorCode::kDuplicateKey, duplicate->offset,
           "duplicate key " + describe_key(duplicate->key) + " in object");
      prepend_path_key(duplicate->key, error_.param);
      return false;
    }
    seen_keys_.erase(seen_keys_.begin() + static_cast<std::ptrdiff_t>(base), seen_keys_.end());
    out = Value(std::move(members));
    return true;
  }

  bool is_element_key(std::string_view key) const {
    return std::find(element_keys_.begin(), element_keys_.end(), key) != element_keys_.end();
  }

  // An element of a list named in element_keys_ (a container at `depth`): taken from the
  // thread's ElementMemo when its bytes are there with a tree, else built, and kept there from
  // its second sighting.
  bool build_element(ondemand::value& child, ondemand::json_type type, Value& out,
                     std::size_t depth) {
    const std::size_t begin = offset_of(raw_token(child).data());
    internal::ElementMemo& memo = internal::ElementMemo::for_this_thread();
    internal::ElementMemo::Entry* seen = memo.find(max_depth_, input_.substr(begin));
    if (seen != nullptr && seen->tree != nullptr) {
      if (!skip_container(child, type, seen->bytes.size())) return false;
      out = Value::shared(seen->tree);
      kept_tree_bytes_ = seen->tree_bytes;
      return true;
    }
    if (!build(child, type, out, depth)) return false;
    std::size_t end = current_offset();
    while (end > begin && is_json_whitespace(input_[end - 1])) --end;
    const std::string_view bytes = input_.substr(begin, end - begin);
    if (seen == nullptr) {
      memo.note(max_depth_, bytes);
      return true;
    }
    PG_DCHECK(seen->bytes.size() == bytes.size());
    // A tree too large to keep stays this document's own.
    if (auto tree = memo.keep(*seen, out)) {
      out = Value::shared(std::move(tree));
      kept_tree_bytes_ = seen->tree_bytes;
    }
    return true;
  }

  bool is_shared_key(std::string_view key, ondemand::json_type type) const {
    if (type != ondemand::json_type::array && type != ondemand::json_type::object) return false;
    return std::find(shared_keys_.begin(), shared_keys_.end(), key) != shared_keys_.end();
  }

  // Consumes a container the memo matched, `bytes` long (what lies past it up to the next token
  // is whitespace).
  bool skip_container(ondemand::value& child, ondemand::json_type type, std::size_t bytes) {
    std::string_view raw;
    if (type == ondemand::json_type::array) {
      ondemand::array array;
      if (auto err = child.get_array().get(array)) return fail_simdjson(err);
      if (auto err = array.raw_json().get(raw)) return fail_simdjson(err);
    } else {
      ondemand::object object;
      if (auto err = child.get_object().get(object)) return fail_simdjson(err);
      if (auto err = object.raw_json().get(raw)) return fail_simdjson(err);
    }
    PG_DCHECK(raw.size() >= bytes && trim_trailing_whitespace(raw).size() == bytes);
    return true;
  }

  // A shareable value just built from `bytes`: the memo keeps it on its second sighting (`seen`,
  // its entry from the first), and from then on the document refers to the kept tree too.
  void share(std::string_view key, std::string_view bytes, internal::SubtreeMemo::Entry* seen,
             Value& value) const {
    if (seen == nullptr) {
      internal::SubtreeMemo::for_this_thread().note(key, max_depth_, bytes);
      return;
    }
    PG_DCHECK(seen->bytes.size() == bytes.size());
    seen->tree = std::make_shared<const Value>(std::move(value));
    value = Value::shared(seen->tree);
  }

  // The first key of seen_keys_[base, end) that repeats an earlier one, in document order.
  const SeenKey* find_duplicate(std::size_t base) const {
    const SeenKey* begin = seen_keys_.data() + base;
    const std::size_t n = seen_keys_.size() - base;
    if (n <= kPairwiseDuplicateCheckMax) {
      for (std::size_t j = 1; j < n; ++j) {
        for (std::size_t i = 0; i < j; ++i) {
          if (begin[i].key == begin[j].key) return &begin[j];
        }
      }
      return nullptr;
    }
    // Sorting, not hashing: a fixed-seed hash of client-chosen keys invites collisions, and
    // std::sort is O(n log n) whatever the keys.
    std::vector<std::size_t> order(n);
    for (std::size_t i = 0; i < n; ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t a, std::size_t b) { return begin[a].key < begin[b].key; });
    const SeenKey* first_duplicate = nullptr;
    for (std::size_t k = 1; k < n; ++k) {
      // stable_sort keeps equal keys in document order, so order[k] repeats order[k - 1].
      if (begin[order[k]].key == begin[order[k - 1]].key &&
          (first_duplicate == nullptr || begin + order[k] < first_duplicate)) {
        first_duplicate = begin + order[k];
      }
    }
    return first_duplicate;
  }

  template <class Node>
  bool build_string(Node& node, Value& out) {
    const std::size_t quote = offset_of(raw_token(node).data());
    std::string_view text;
    if (auto err = node.get_string().get(text)) return fail_string(err, quote);
    out = Value(text);
    return true;
  }

  bool build_number(std::string_view token, Value& out) {
    const std::size_t at = offset_of(token.data());
    token = trim_trailing_whitespace(token);
    double value = 0;
    switch (read_number(token, value)) {
      case NumberRead::kOk: break;
      case NumberRead::kTooLarge:
        // ECMAScript's JSON.parse would make this Infinity, which neither JSON nor RFC 8785
        // (section 3.2.2.3) can write back.
        return fail(ErrorCode::kInvalidValue, at, "number is too large for a double");
      case NumberRead::kInvalid:
        return fail(ErrorCode::kInvalidJson, at, describe_simdjson_error(simdjson::NUMBER_ERROR));
    }
    out = Value(Number{value, std::string(token)});
    return true;
  }

  bool build_literal(std::string_view token, Value& out) {
    const std::size_t at = offset_of(token.data());
    std::optional<Value> literal = read_literal(trim_trailing_whitespace(token));
    if (!literal) {
      return fail(ErrorCode::kInvalidJson, at, describe_simdjson_error(simdjson::N_ATOM_ERROR));
    }
    out = std::move(*literal);
    return true;
  }

  // A string (value or key) whose opening quote is at `quote` failed to unescape.
  bool fail_string(simdjson::error_code err, std::size_t quote) {
    if (err != simdjson::STRING_ERROR) return fail_simdjson(err);
    bool lone_surrogate = false;
    const std::size_t at =
        quote + 1 + classify_string_error(input_.substr(quote + 1), &lone_surrogate);
    if (lone_surrogate) {
      return fail(ErrorCode::kInvalidUtf8, at,
                  "unpaired UTF-16 surrogate escape " + std::string(input_.substr(at, 6)) +
                      " (not a Unicode character)");
    }
    return fail(ErrorCode::kInvalidJson, at, describe_simdjson_error(err));
  }

  bool fail_too_deep() {
    return fail(ErrorCode::kTooDeep, current_offset(),
                "nesting deeper than " + std::to_string(max_depth_) + " levels");
  }

  bool fail_simdjson(simdjson::error_code err) {
    const ErrorCode code =
        err == simdjson::UTF8_ERROR ? ErrorCode::kInvalidUtf8 : ErrorCode::kInvalidJson;
    return fail(code, current_offset(), describe_simdjson_error(err));
  }

  bool fail(ErrorCode code, std::size_t offset, std::string_view what) {
    error_ = make_error(code, located(what, offset, input_.size()));
    return false;
  }

  std::size_t current_offset() {
    const char* location = nullptr;
    if (doc_.current_location().get(location) || location == nullptr) return input_.size();
    return offset_of(location);
  }

  std::size_t offset_of(const char* p) const {
    PG_DCHECK(p >= input_.data() && p <= input_.data() + input_.size());
    return static_cast<std::size_t>(p - input_.data());
  }

  std::string_view input_;  // the padded copy simdjson is reading
  std::size_t max_depth_;
  ondemand::document& doc_;
  std::vector<MemberSpan>* root_members_;           // recorded when not null
  std::span<const std::string_view> shared_keys_;   // root members taken from SubtreeMemo
  std::span<const std::string_view> element_keys_;  // root lists whose elements ElementMemo holds
  internal::ElementListSeen* list_seen_;            // the first such list, recorded when not null
  std::size_t kept_tree_bytes_ = 0;                 // of the element just taken from ElementMemo
  ParseScratch& scratch_;
  std::vector<SeenKey>& seen_keys_ = scratch_.keys;  // after scratch_, which it refers to
  Error error_{ErrorCode::kInvalidJson, {}, {}};
};

Error too_large(std::size_t bytes, std::size_t limit) {
  return make_error(ErrorCode::kTooLarge, "JSON body is " + std::to_string(bytes) +
                                              " bytes; the limit is " + std::to_string(limit));
}

// Allocation failed, or simdjson's 4 GiB ceiling: only when max_bytes allows huge bodies.
Error too_large_to_parse(std::size_t bytes) {
  return make_error(ErrorCode::kTooLarge,
                    "JSON body of " + std::to_string(bytes) + " bytes is too large to parse");
}

Error from_iterate_error(simdjson::error_code err, std::string_view input) {
  std::size_t at = input.size();
  ErrorCode code = ErrorCode::kInvalidJson;
  if (err == simdjson::UTF8_ERROR) {
    code = ErrorCode::kInvalidUtf8;
    at = first_invalid_utf8(input);
  } else if (err == simdjson::UNESCAPED_CHARS) {
    at = first_unescaped_control(input);
  } else if (err == simdjson::CAPACITY || err == simdjson::MEMALLOC) {
    return too_large_to_parse(input.size());
  }
  const std::string_view what =
      err == simdjson::UTF8_ERROR ? "bytes that are not UTF-8" : describe_simdjson_error(err);
  return make_error(code, located(what, at, input.size()));
}

Result<Value> parse_with(ondemand::parser& parser, simdjson::padded_string_view padded,
                         const ParseLimits& limits, std::vector<MemberSpan>* root_members,
                         const MemoKeys& memo_keys,
                         internal::ElementListSeen* list_seen = nullptr) {
  const std::string_view input(padded.data(), padded.length());
  ondemand::document doc;
  if (auto err = parser.iterate(padded).get(doc)) return from_iterate_error(err, input);
  const ThreadScratch scratch;
  TreeBuilder builder(input, limits, doc, root_members, memo_keys, scratch.scratch, list_seen);
  Value root;
  if (!builder.build_root(root)) return builder.take_error();
  return root;
}

static_assert(kParsePadding >= simdjson::SIMDJSON_PADDING);

// The thread's parser for documents up to kReusableParserBytes.
ondemand::parser& reusable_parser() {
  thread_local ondemand::parser parser;
  return parser;
}

// The whole of `text` parsed, recording its first element list in `list_seen` when given.
Result<Value> parse_whole(std::string_view text, const ParseLimits& limits,
                          std::vector<MemberSpan>* root_members, const MemoKeys& memo_keys,
                          internal::ElementListSeen* list_seen) {
  // On Demand reads up to SIMDJSON_PADDING bytes past the end. A text whose buffer has them is
  // parsed where it lies (a 30 KB agent turn is 30 KB less to write and read again); otherwise
  // usual sizes are copied into the thread's padded buffer (no allocation per request), larger
  // ones into a copy of their own, so that one huge body does not keep its memory for the
  // thread's life.
  if (text.size() <= kReusableParserBytes) {
    ondemand::parser& reused = reusable_parser();
    if (limits.readable_past_end >= kParsePadding) {
      Result<Value> in_place =
          parse_with(reused,
                     simdjson::padded_string_view(text.data(), text.size(),
                                                  text.size() + limits.readable_past_end),
                     limits, root_members, memo_keys, list_seen);
      // What the padding holds can change which fault in a text that is not JSON simdjson
      // reports first (never whether it is JSON): an error is found again from the zeroed
      // padding of a copy, so that its message does not depend on how the body arrived.
      if (in_place.ok()) return in_place;
      if (root_members != nullptr) root_members->clear();
      if (list_seen != nullptr) *list_seen = {};
    }
    thread_local std::string buffer;
    return parse_with(reused, padded_in(buffer, text), limits, root_members, memo_keys, list_seen);
  }
  const simdjson::padded_string padded(text);
  if (padded.data() == nullptr) return too_large_to_parse(text.size());
  ondemand::parser once;
  return parse_with(once, padded, limits, root_members, memo_keys, list_seen);
}

// `text` parsed from where it stops sharing a body the document memo remembers
// (json_document_memo.h): its bytes after the ',' at resume.comma, behind `{"<list key>":[0,`,
// joined to the remembered members and elements. None when that part does not parse, or repeats
// a key of the members before the list: the whole parse then says what is wrong.
std::optional<Value> parse_resumed(std::string_view text, const ParseLimits& limits,
                                   const internal::DocumentMemo::Resume& resume,
                                   std::vector<MemberSpan>& root_members, const MemoKeys& memo_keys,
                                   internal::ElementListSeen& list, bool& tail_taken) {
  const internal::DocumentMemo::Entry& e = *resume.entry;
  const std::size_t list_member = e.head.size() - 1;
  const std::string& list_key = e.head.back().key;
  // A body that also ends as the remembered one does from its list's ']' on (the same members
  // after the list) is parsed only up to that ']', and takes those members as they were.
  const std::size_t suffix = e.tail_from_end;
  const bool tail_kept = suffix != 0 && text.size() >= suffix &&
                         text.size() - suffix > resume.comma + 1 &&
                         text.ends_with(std::string_view(e.text).substr(e.text.size() - suffix));
  thread_local std::string buffer;
  buffer.assign("{");
  append_quoted(list_key, buffer);
  buffer.append(":[0,");
  const std::size_t wrapper = buffer.size();
  const std::string_view rest =
      tail_kept ? text.substr(resume.comma + 1, text.size() - suffix - (resume.comma + 1))
                : text.substr(resume.comma + 1);
  buffer.append(rest);
  if (tail_kept) buffer.append("]}");
  const std::size_t length = buffer.size();
  buffer.append(simdjson::SIMDJSON_PADDING, '\0');
  // Reused: a request allocates none of them.
  thread_local std::vector<MemberSpan> spans;
  thread_local internal::ElementListSeen tail;
  spans.clear();
  tail.found = false;
  tail.elements.clear();
  Result<Value> parsed = parse_with(
      reusable_parser(), simdjson::padded_string_view(buffer.data(), length, buffer.size()), limits,
      &spans, memo_keys, &tail);
  if (!parsed || !parsed->is_object() || !tail.found || tail.member != 0) return std::nullopt;
  Object& tail_members = parsed->as_object();
  if (tail_members.empty() || tail_members[0].key != list_key ||
      !tail_members[0].value.is_array() || spans.size() != tail_members.size() ||
      (tail_kept && tail_members.size() != 1)) {
    return std::nullopt;
  }
  for (std::size_t i = 1; i < tail_members.size(); ++i) {
    for (std::size_t j = 0; j < list_member; ++j) {
      if (tail_members[i].key == e.head[j].key) return std::nullopt;
    }
  }
  // Offsets in the parsed part back to the body's.
  const auto moved = [&](std::size_t offset) { return offset - wrapper + resume.comma + 1; };
  Object members;
  members.reserve(list_member + tail_members.size() + (tail_kept ? e.tail.size() : 0));
  members.insert(members.end(), e.head.begin(),
                 e.head.begin() + static_cast<std::ptrdiff_t>(list_member));
  const Array& kept = e.head.back().value.as_array();
  Array& new_items = tail_members[0].value.as_array();
  Array items;
  items.reserve(resume.elements + new_items.size() - 1);
  items.insert(items.end(), kept.begin(),
               kept.begin() + static_cast<std::ptrdiff_t>(resume.elements));
  std::move(new_items.begin() + 1, new_items.end(), std::back_inserter(items));
  // Taken from here, not through the element memo: used all the same.
  internal::ElementMemo& element_memo = internal::ElementMemo::for_this_thread();
  for (std::size_t i = 0; i < resume.elements; ++i) {
    if (kept[i].is_shared()) element_memo.touch(kept[i]);
  }
  members.emplace_back(list_key, Value(std::move(items)));
  std::move(tail_members.begin() + 1, tail_members.end(), std::back_inserter(members));
  if (tail_kept) {
    internal::SubtreeMemo& subtree_memo = internal::SubtreeMemo::for_this_thread();
    for (const Member& m : e.tail) {
      if (m.value.is_shared()) subtree_memo.touch(m.value);  // used as if parsed
      members.push_back(m);
    }
  }

  root_members.assign(e.head_spans.begin(),
                      e.head_spans.begin() + static_cast<std::ptrdiff_t>(list_member));
  root_members.push_back(MemberSpan{e.head_spans[list_member].begin, moved(spans[0].end)});
  for (std::size_t i = 1; i < spans.size(); ++i) {
    root_members.push_back(MemberSpan{moved(spans[i].begin), moved(spans[i].end)});
  }
  if (tail_kept) {
    for (const MemberSpan& from_end : e.tail_spans_from_end) {
      root_members.push_back(MemberSpan{text.size() - from_end.begin, text.size() - from_end.end});
    }
  }
  // The list as a whole parse would have recorded it: the kept elements', then the new ones'
  // (the placeholder's ',' is the last kept element's).
  list.found = true;
  list.member = list_member;
  list.elements.assign(e.elements.begin(),
                       e.elements.begin() + static_cast<std::ptrdiff_t>(resume.elements));
  for (std::size_t i = 1; i < tail.elements.size(); ++i) {
    internal::ElementListSeen::Element element = tail.elements[i];
    if (element.comma != internal::ElementListSeen::kNoComma) element.comma = moved(element.comma);
    list.elements.push_back(element);
  }
  tail_taken = tail_kept;
  return Value(std::move(members));
}

Result<Value> parse_text(std::string_view text, const ParseLimits& limits,
                         std::vector<MemberSpan>* root_members, const MemoKeys& memo_keys = {}) {
  if (text.size() > limits.max_bytes) return too_large(text.size(), limits.max_bytes);
  if (root_members == nullptr || memo_keys.elements.empty() ||
      text.size() > internal::DocumentMemo::kMaxTextBytes) {
    return parse_whole(text, limits, root_members, memo_keys, nullptr);
  }
  // A request body: from where it stops sharing one parsed lately, when it can.
  internal::DocumentMemo& memo = internal::DocumentMemo::for_this_thread();
  const std::uint64_t keys = internal::memo_keys_hash(memo_keys);
  const auto resume = memo.find(text, limits.max_depth, keys);
  thread_local internal::ElementListSeen list;
  list.found = false;
  list.elements.clear();
  if (resume) {
    bool tail_taken = false;
    if (std::optional<Value> joined =
            parse_resumed(text, limits, *resume, *root_members, memo_keys, list, tail_taken)) {
      memo.count_resume(tail_taken);
      memo.remember(text, limits.max_depth, memo_keys, keys, *joined, *root_members, list, resume,
                    true);
      return std::move(*joined);
    }
    root_members->clear();
    list.found = false;
    list.elements.clear();
  }
  Result<Value> parsed = parse_whole(text, limits, root_members, memo_keys, &list);
  if (parsed) {
    memo.remember(text, limits.max_depth, memo_keys, keys, *parsed, *root_members, list, resume,
                  false);
  }
  return parsed;
}

}  // namespace

Result<Value> parse(std::string_view text, const ParseLimits& limits) {
  return parse_text(text, limits, nullptr);
}

Result<Value> parse(std::string_view text, const ParseLimits& limits,
                    std::vector<MemberSpan>& root_members, const MemoKeys& memo_keys) {
  root_members.clear();
  // Room for a request's usual members (model, messages, tools, max_tokens, ...) at once: grown
  // a member at a time, a new vector would allocate three or four times a request.
  constexpr std::size_t kUsualRootMembers = 12;
  root_members.reserve(kUsualRootMembers);
  auto parsed = parse_text(text, limits, &root_members, memo_keys);
  if (!parsed) root_members.clear();
  return parsed;
}

}  // namespace prefixgate::json
