// Pieces the chat workloads share: message objects and a chat completion body.
#pragma once

#include <cstddef>
#include <string>

#include "prefixgate/canonicalize/json.h"

namespace prefixgate::bench {

inline json::Value chat_message(const char* role, std::string content) {
  return json::Object{{"role", role}, {"content", std::move(content)}};
}

// {"model", "messages", ["tools"], "max_tokens", "temperature": 0, "ignore_eos": true}
inline std::string chat_body(const std::string& model, json::Array messages,
                             const json::Array* tools, std::size_t max_tokens) {
  json::Object body{{"model", model}, {"messages", std::move(messages)}};
  if (tools != nullptr && !tools->empty()) body.push_back({"tools", *tools});
  body.push_back({"max_tokens", static_cast<double>(max_tokens)});
  body.push_back({"temperature", 0});
  body.push_back({"ignore_eos", true});
  return json::to_json(json::Value(std::move(body)));
}

}  // namespace prefixgate::bench
