#include "tool_list_memo.h"

#include <cstring>

namespace prefixgate::canon::internal {

ToolListMemo& ToolListMemo::for_this_thread() {
  thread_local ToolListMemo memo;
  return memo;
}

const ToolListOutcome* ToolListMemo::find(std::string_view source, std::uint64_t rules) {
  Entry* hit = entries_.find([&](const Entry& e) {
    return e.rules == rules && e.source.size() == source.size() &&
           std::memcmp(e.source.data(), source.data(), source.size()) == 0;
  });
  return hit != nullptr ? &hit->outcome : nullptr;
}

void ToolListMemo::remember(std::string_view source, std::uint64_t rules, ToolListOutcome outcome) {
  if (source.size() > kToolListMemoMaxBytes) return;
  Entry& e = entries_.replace();
  e.source.assign(source);
  e.rules = rules;
  e.outcome = std::move(outcome);
}

std::shared_ptr<const ToolListText> tool_list_text_of(std::string_view key,
                                                      const json::Value& list) {
  auto text = std::make_shared<ToolListText>();
  text->key = std::string(key);
  text->json += '[';
  for (const json::Value& item : list.as_array()) {
    if (text->json.size() > 1) text->json += ',';
    const auto begin = static_cast<std::uint32_t>(text->json.size());
    json::append_json(item, text->json);
    text->items.emplace_back(begin, static_cast<std::uint32_t>(text->json.size()));
  }
  text->json += ']';
  return text;
}

}  // namespace prefixgate::canon::internal

namespace prefixgate::canon {

void keep_tool_list_texts(ParsedRequest& request) {
  request.tool_texts.clear();
  for (std::string_view key : {"tools", "functions"}) {
    const json::Value* list = request.body.find(key);
    if (list != nullptr && list->is_array()) {
      request.tool_texts.push_back(internal::tool_list_text_of(key, *list));
    }
  }
}

}  // namespace prefixgate::canon
