// The thread's memo of the messages parse_request_value() validated and converted, by the tree
// they were parsed from (shared_tree_memo.h): an agent resends its whole conversation on every
// turn, and the JSON parser already hands each earlier turn back as the very tree it built for it
// before. Converting that tree into a Message again (looking up its fields, checking their types,
// copying its text) made a long conversation's request cost a few thousand instructions for each
// earlier turn. parse_message's result depends on the tree alone (and on the index, which the
// caller sets); a copy of a kept message shares its texts (SharedText).
#pragma once

#include <cstddef>

#include "prefixgate/canonicalize/json.h"
#include "prefixgate/canonicalize/request.h"
#include "shared_tree_memo.h"

namespace prefixgate::canon::internal {

class MessageMemo : public SharedTreeMemo<Message> {
 public:
  static constexpr std::size_t kMaxEntries = 1024;
  static constexpr std::size_t kMaxTotalBytes = std::size_t{16} << 20;

  MessageMemo() : SharedTreeMemo(kMaxEntries, kMaxTotalBytes) {}
  static MessageMemo& for_this_thread();

  // Keeps `message`, parsed from `tree` (see SharedTreeMemo::keep).
  void keep(const json::Value& tree, const Message& message);
};

}  // namespace prefixgate::canon::internal
