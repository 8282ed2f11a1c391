// JSON: any bytes into json::parse, from its own padded copy and where they lie (the same
// result); into visit_member_fields for the root's first member, which must see what a walk of
// parse()'s tree sees wherever parse() succeeds; what parses must survive the RFC 8785 writer:
// parse -> to_canonical_json -> parse -> to_canonical_json gives the same bytes, the canonical
// form is_canonical(), and both writers' output parses in simdjson's DOM parser (a second,
// independent one); parse() sharing root members and list elements through its memos gives what
// it gives without; a streamed chat chunk read without a tree (parse_plain_chat_chunk) is only
// ever one parse() reads, and reads the same.
#include <simdjson.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "prefixgate/canonicalize/chat_reply.h"
#include "prefixgate/canonicalize/json.h"

namespace {

using namespace prefixgate;

[[noreturn]] void fail(const char* what, std::string_view detail) {
  std::fprintf(stderr, "fuzz_json: %s: %.*s\n", what, static_cast<int>(detail.size()),
               detail.data());
  std::abort();
}

// A run of 19 or more digits: an integer that may lie outside int64/uint64, which this
// simdjson's DOM parser refuses (NUMBER_ERROR) although it is valid JSON. ECMAScript's number
// form writes every integer below 1e21 in full, so the canonical writer produces them.
bool has_long_integer(std::string_view text) {
  std::size_t run = 0;
  for (const char ch : text) {
    run = (ch >= '0' && ch <= '9') ? run + 1 : 0;
    if (run >= 19) return true;
  }
  return false;
}

// `numbers_as_sent`: to_json writes a number's source text, which may be valid JSON whose value
// simdjson's DOM cannot hold (1e400); the canonical form never is.
void check_simdjson(const std::string& text, bool numbers_as_sent) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  const auto error = parser.parse(text).get(doc);
  if (error == simdjson::SUCCESS) return;
  const bool number_error =
      error == simdjson::NUMBER_ERROR || error == simdjson::NUMBER_OUT_OF_RANGE;
  if (number_error && (numbers_as_sent || has_long_integer(text))) return;
  fail(simdjson::error_message(error), text);
}

}  // namespace

// Parsed where it lies (the padding past its end filled with bytes that would continue it),
// the same result as from the parser's own padded copy.
void check_in_place(std::string_view text, const Result<json::Value>& copied) {
  std::string buffer(text);
  buffer.append(json::kParsePadding, text.empty() ? '"' : text.back());
  json::ParseLimits in_place;
  in_place.readable_past_end = json::kParsePadding;
  const auto direct = json::parse(std::string_view(buffer.data(), text.size()), in_place);
  if (direct.ok() != copied.ok()) fail("in place: a different outcome", text);
  if (copied.ok() ? !(*direct == *copied) : direct.error().message != copied.error().message) {
    fail("in place: a different result", text);
  }
}

// The fields visit_member_fields reports for the root object's first member, as text, against
// those of a walk of the parsed tree. It may accept what parse() refuses (it does not look for
// repeated keys, nor into values it skips), so only a parsed document is compared.
std::string fields_line(std::string_view object, std::string_view key, json::Type type,
                        double number) {
  return std::string(object) + "." + std::string(key) + ":" + json::type_name(type) + "=" +
         std::to_string(number) + "\n";
}

// The fields `visit` reports for the root's member `member`, as text, against those of a walk of
// the parsed tree.
template <class Visit>
void check_member_visit(std::string_view text, const json::Member& member, Visit visit,
                        const char* what) {
  std::string visited;
  const bool ok = visit(text, member.key, [&](const json::FieldSeen& f) {
    visited += fields_line(f.object, f.key, f.type, f.number);
  });
  if (ok != member.value.is_object())
    fail((std::string(what) + ": a different outcome").c_str(), text);
  if (!ok) return;
  std::string walked;
  const auto line = [&](std::string_view object, const json::Member& m) {
    walked += fields_line(object, m.key, m.value.type(),
                          m.value.is_number() ? m.value.as_number().value : 0);
  };
  for (const json::Member& m : member.value.as_object()) {
    line({}, m);
    if (!m.value.is_object()) continue;
    for (const json::Member& inner : m.value.as_object()) line(m.key, inner);
  }
  if (visited != walked) fail((std::string(what) + ": different fields").c_str(), text);
}

// visit_member_fields for the root's first member, visit_last_member_fields for its first and
// its last (found from the end, or, when it is not last, from the start).
void check_visit_member(std::string_view text, const json::Value& doc) {
  if (!doc.is_object() || doc.as_object().empty()) return;
  const auto forward = [](std::string_view t, std::string_view key, const auto& visit) {
    return json::visit_member_fields(t, key, visit);
  };
  const auto from_end = [](std::string_view t, std::string_view key, const auto& visit) {
    return json::visit_last_member_fields(t, key, visit);
  };
  check_member_visit(text, doc.as_object().front(), forward, "visit_member_fields");
  check_member_visit(text, doc.as_object().front(), from_end, "visit_last_member_fields (first)");
  check_member_visit(text, doc.as_object().back(), from_end, "visit_last_member_fields (last)");
}

// Parsed with its root members shared (the request parser's tool-list memo) and the elements
// of root lists shared (its message memo), three times so that the memos note, keep and then
// hand out what they can, and so that the document memo (json_document_memo.h) parses it from
// where it stops sharing an earlier input or itself: the same outcome, tree, member spans and
// error as without them.
void check_shared_members(std::string_view text, const Result<json::Value>& plain_doc) {
  std::vector<json::MemberSpan> plain_spans;
  const auto plain = json::parse(text, {}, plain_spans);
  if (plain.ok() != plain_doc.ok()) fail("spans: a different outcome", text);
  std::string first_key = "tools";
  if (plain.ok() && plain->is_object() && !plain->as_object().empty()) {
    first_key = plain->as_object().front().key;
  }
  const std::string_view keys[] = {first_key, "functions"};
  const std::string_view element_keys[] = {first_key, "messages"};
  for (int round = 0; round < 3; ++round) {
    std::vector<json::MemberSpan> spans;
    const auto shared =
        json::parse(text, {}, spans, json::MemoKeys{.shared = keys, .elements = element_keys});
    if (shared.ok() != plain.ok()) fail("shared members: a different outcome", text);
    if (!plain.ok()) {
      if (shared.error().message != plain.error().message) {
        fail("shared members: a different error", text);
      }
      continue;
    }
    if (!(*shared == *plain) || json::to_json(*shared) != json::to_json(*plain)) {
      fail("shared members: a different tree", text);
    }
    if (spans.size() != plain_spans.size()) fail("shared members: other spans", text);
    for (std::size_t i = 0; i < spans.size(); ++i) {
      if (spans[i].begin != plain_spans[i].begin || spans[i].end != plain_spans[i].end) {
        fail("shared members: other spans", text);
      }
    }
  }
}

// Whatever parse_plain_chat_chunk accepts, parse() accepts, with no error member, and
// parse_chat_chunk() of its tree gives the same reply, without usage.
void check_plain_chat_chunk(std::string_view text, const Result<json::Value>& doc) {
  const std::optional<canon::ChatReply> plain = canon::parse_plain_chat_chunk(text);
  if (!plain) return;
  if (!doc || !doc->is_object()) fail("plain chat chunk: accepted what parse() refuses", text);
  if (const json::Value* error = doc->find("error"); error != nullptr && !error->is_null()) {
    fail("plain chat chunk: accepted an error", text);
  }
  const auto reply = canon::parse_chat_chunk(*doc);
  if (!reply || !(*reply == *plain) || reply->usage) fail("plain chat chunk: another reply", text);
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto doc = json::parse(text);
  check_in_place(text, doc);
  check_shared_members(text, doc);
  check_plain_chat_chunk(text, doc);
  if (!doc) return 0;
  check_visit_member(text, *doc);

  const std::string compact = json::to_json(*doc);
  check_simdjson(compact, /*numbers_as_sent=*/true);
  auto again = json::parse(compact);
  if (!again) fail("to_json output does not parse", compact);
  if (json::to_json(*again) != compact) fail("to_json is not stable", compact);

  auto canonical = json::to_canonical_json(*doc);
  if (!canonical) return 0;  // a number JSON cannot carry (the writer says so)
  check_simdjson(*canonical, /*numbers_as_sent=*/false);
  auto reparsed = json::parse(*canonical);
  if (!reparsed) fail("canonical output does not parse", *canonical);
  if (!json::is_canonical(*reparsed)) fail("canonical output is not canonical", *canonical);
  auto twice = json::to_canonical_json(*reparsed);
  if (!twice || *twice != *canonical) fail("canonical round trip differs", *canonical);
  return 0;
}
