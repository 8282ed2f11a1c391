// A JSON object written for a proxy: the members nothing changed are the client's bytes, and the
// largest of them are not even copied but left where they lie, to go out with one gathered write
// (writev). A 30 KB conversation whose tool list a rule put in canonical form then travels from
// the client's read buffer to the replica's socket without a copy of its messages.
//
//   json::SplicedJson out;
//   json::append_json_spliced(body_tree, source, {"tools"}, client_body, out);
//   out.for_each_piece([&](std::string_view piece) { buffers.push_back(piece); });
//
// The spliced pieces refer to `stable` (the client's body): the result is valid while it is.
#pragma once

#include <array>
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "prefixgate/canonicalize/json.h"

namespace prefixgate::json {

struct SplicedJson {
  // At most this many pieces are spliced: with the written text around them, 2 x 3 + 1 buffers
  // and a request's head fit the one sendmsg a proxied request is written with.
  static constexpr std::size_t kMaxSplices = 3;
  // Shorter source texts are copied: a buffer of its own costs the kernel more than that.
  static constexpr std::size_t kMinSpliceBytes = 1024;

  struct Splice {
    std::size_t at = 0;       // where in `text` the piece goes
    std::string_view source;  // the piece, in the caller's memory
  };

  SplicedJson() = default;
  // All of `whole`, owned.
  explicit SplicedJson(std::string whole) : text(std::move(whole)) {}
  // All of `whole`, spliced: no copy (a body that nothing changed).
  static SplicedJson borrowing(std::string_view whole);

  std::size_t size() const;
  // The whole document as one string (a copy: for inspection and tests).
  std::string flattened() const;
  // Calls f(std::string_view) with the non-empty pieces in order: at most 2 * kMaxSplices + 1.
  template <class F>
  void for_each_piece(F&& f) const {
    std::size_t from = 0;
    for (std::size_t i = 0; i < splice_count; ++i) {
      if (splices[i].at > from) f(std::string_view(text).substr(from, splices[i].at - from));
      if (!splices[i].source.empty()) f(splices[i].source);
      from = splices[i].at;
    }
    if (text.size() > from) f(std::string_view(text).substr(from));
  }

  std::string text;  // what was written, the spliced pieces left out
  std::array<Splice, kMaxSplices> splices{};
  std::size_t splice_count = 0;
};

// append_json_reusing() (json.h) into `out`: a member found in `source` by key and not named in
// `rewritten` is written as its source text, which is spliced instead of copied when it lies
// within `stable`, is at least kMinSpliceBytes long and a splice is left; copied otherwise.
void append_json_spliced(const Value& object, const std::vector<SourceMember>& source,
                         const std::vector<std::string_view>& rewritten, std::string_view stable,
                         SplicedJson& out);

}  // namespace prefixgate::json
