// Builds a ChatConversion (chat_conversion.h) message by message: the chat body, where each of
// its fields came from, and the client's breakpoints. Shared by the Messages and Responses
// parsers, so that both make the same chat shapes (one text block is string content, several
// blocks are content parts, tool definitions in RFC 8785 member order).
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "prefixgate/canonicalize/chat_conversion.h"
#include "shared_tree_memo.h"

namespace prefixgate::canon {

inline PathStep key_step(std::string_view key) {
  return PathStep{.key = std::string(key), .index = 0, .is_index = false};
}
inline PathStep index_step(std::size_t i) {
  return PathStep{.key = {}, .index = i, .is_index = true};
}
inline JsonPath with_key(JsonPath path, std::string_view key) {
  path.push_back(key_step(key));
  return path;
}
inline JsonPath with_index(JsonPath path, std::size_t i) {
  path.push_back(index_step(i));
  return path;
}

// One block of a client's content, validated.
struct ContentBlock {
  JsonPath path = {};       // the block, or the string when `whole`
  std::string source = {};  // `path` as text, for breakpoints and reports
  std::string text = {};    // text blocks
  bool is_text = false;
  json::Value part = {};    // other blocks: the chat content part ({"type": "image_url", ...})
  bool whole = false;       // the client's content was this one string
  bool breakpoint = false;  // it carries cache_control
  std::string text_key = "text";  // the member holding a text block's text
};

// A tool call made by the model, as a chat tool_calls entry.
struct ToolCallBlock {
  json::Value call;
  JsonPath path;
  std::string source;
  bool breakpoint = false;
};

// What converting one client message (a Messages turn, a Responses input item) added, to add
// again for the same message in a later request (its tree shared by the parser): its chat
// messages, made shared trees, and their origins, whose paths name its index `index` in the
// client's list. Only a message whose conversion adds chat messages without reading or changing
// those before it is kept (not a Responses function call, which may extend the message before).
struct ConvertedTurn {
  std::vector<std::shared_ptr<const json::Value>> messages;
  std::vector<std::shared_ptr<const MessageOrigin>> origins;
  std::size_t index = 0;
  bool open_assistant = false;  // the builder's state after it (add_tool_call)
};

class ConversionBuilder {
 public:
  explicit ConversionBuilder(ChatConversion& conversion) : conv_(conversion) {}

  // A message whose content is `blocks`: one text block is string content, else content parts.
  void add_content_message(std::string_view role, const std::vector<ContentBlock>& blocks,
                           JsonPath source);
  // An assistant message: its text blocks and tool calls (content null when there is no text).
  void add_assistant(const std::vector<ContentBlock>& texts, std::vector<ToolCallBlock> calls,
                     JsonPath source);
  // A tool call appended to the previous message when it is an assistant message that may take
  // more (the Responses API lists a turn's calls as separate items), else a new one.
  void add_tool_call(ToolCallBlock call, JsonPath source);
  // A {"role": "tool"} message answering `call_id`.
  void add_tool_result(std::string_view call_id, const std::vector<ContentBlock>& blocks,
                       JsonPath source, std::string_view source_text, bool breakpoint);
  // {"function": {"description", "name", "parameters", "strict"}, "type": "function"}; absent
  // members (nullptr) are left out. The members lie in `list`, the client's tool list: where it
  // is shared (json::parse's memo) they are shared with it, not copied.
  void add_tool(const json::Value& list, const std::string& name, const json::Value* description,
                const json::Value* parameters, const json::Value* strict,
                const std::string& source_text, bool breakpoint);
  // A breakpoint at the end of the last message so far (Anthropic's top-level cache_control).
  void mark_last_message(std::string source_text);
  // Ends an assistant message that add_tool_call() may extend.
  void close_turn() { open_assistant_ = false; }

  // Where the next client message's output begins.
  struct Mark {
    std::size_t messages = 0;
    std::size_t breakpoints = 0;
  };
  Mark mark() const { return Mark{messages_.size(), conv_.breakpoints.size()}; }
  // Adds again what the client message `tree` (at `client_index` of its list) converted into
  // in an earlier request, from the thread's ConvertedTurnMemo; false when it holds nothing
  // for that tree (one the parser does not share never is).
  bool add_kept(const json::Value& tree, std::size_t client_index);
  // Keeps what the client message `tree` at `client_index`, converted since `from`, added,
  // when the parser shares `tree` and it added no breakpoint (whose chat field names a chat
  // message's index, which another request may place elsewhere); its chat messages become
  // shared trees where they lie.
  void keep_converted(const json::Value& tree, Mark from, std::size_t client_index);

  // Moves the messages and tools into `chat`, then `options`' members.
  void finish(json::Object& chat, json::Object options);

 private:
  json::Value content_value(const std::vector<ContentBlock>& blocks, MessageOrigin& origin);
  // Made mutable and held const: add_tool_call may extend it while no kept turn shares it.
  void add_origin(MessageOrigin origin) {
    conv_.messages.push_back(std::make_shared<MessageOrigin>(std::move(origin)));
  }
  std::string message_field() const { return "messages[" + std::to_string(messages_.size()) + "]"; }

  ChatConversion& conv_;
  json::Array messages_;
  json::Array tools_;
  bool open_assistant_ = false;
};

namespace internal {

// The thread's converted turns, by the client message's shared tree: at most 1,024 turns and
// 16 MiB a thread.
class ConvertedTurnMemo : public SharedTreeMemo<ConvertedTurn> {
 public:
  static constexpr std::size_t kMaxEntries = 1024;
  static constexpr std::size_t kMaxTotalBytes = std::size_t{16} << 20;

  ConvertedTurnMemo() : SharedTreeMemo(kMaxEntries, kMaxTotalBytes) {}
  static ConvertedTurnMemo& for_this_thread();

  // Keeps `turn`, converted from `tree` (see SharedTreeMemo::keep).
  void keep(const json::Value& tree, ConvertedTurn turn);
};

}  // namespace internal
}  // namespace prefixgate::canon
