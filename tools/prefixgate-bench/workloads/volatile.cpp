// volatile: a realistic app that breaks its own prefix. Its system prompt states the current
// time to the second (so the bytes change on every request) and its HTTP client serializes the
// tool schemas from a hash map (so key order, and tool order, change from request to request).
// The content is otherwise one fixed system prompt and tool list: after canonicalization
// (timestamp rounded, tools in RFC 8785 form and sorted), every request shares the prefix.
#include <algorithm>
#include <cstdio>

#include "workloads/chat.h"
#include "workloads/workloads.h"

namespace prefixgate::bench {

namespace {

// Shuffles an object's members, recursively: what a client serializing from a hash map does.
json::Value shuffled(const json::Value& v, Rng& rng) {
  if (v.is_object()) {
    json::Object out;
    for (const json::Member& m : v.as_object()) out.push_back({m.key, shuffled(m.value, rng)});
    for (std::size_t i = out.size(); i > 1; --i) std::swap(out[i - 1], out[rng.below(i)]);
    return out;
  }
  if (v.is_array()) {
    json::Array out;
    for (const json::Value& e : v.as_array()) out.push_back(shuffled(e, rng));
    return out;
  }
  return v;
}

// 2026-03-02T09:00:00Z plus `seconds`, as ISO 8601 to the second.
std::string timestamp(double seconds) {
  const unsigned long s = 9 * 3600 + static_cast<unsigned long>(seconds);
  char buf[64];
  std::snprintf(buf, sizeof buf, "2026-03-%02luT%02lu:%02lu:%02luZ", 2 + s / 86400, s / 3600 % 24,
                s / 60 % 60, s % 60);
  return buf;
}

}  // namespace

Workload make_volatile(const VolatileOptions& o, std::uint64_t seed) {
  Rng rng(seed);
  Workload w;
  w.name = "volatile";
  const std::string intro = "You are the support assistant of a store. ";
  const std::string system = random_text(rng, o.system_len);
  json::Array tools;
  for (std::size_t i = 0; i < o.tools; ++i) {
    json::Object params{
        {"type", "object"},
        {"properties",
         json::Object{
             {"order_id", json::Object{{"type", "string"}, {"description", random_text(rng, 40)}}},
             {"include_items", json::Object{{"type", "boolean"}}},
             {"reason", json::Object{{"type", "string"}, {"maxLength", 200}}}}},
        {"required", json::Array{"order_id"}}};
    tools.push_back(
        json::Object{{"type", "function"},
                     {"function", json::Object{{"name", "store_tool_" + std::to_string(i)},
                                               {"description", random_text(rng, 120)},
                                               {"parameters", std::move(params)}}}});
  }
  for (std::size_t r = 0; r < o.requests; ++r) {
    const std::string now = timestamp(static_cast<double>(r) * o.seconds_between_requests);
    json::Array messages{chat_message("system", intro + "Current time: " + now + ". " + system),
                         chat_message("user", random_text(rng, o.question_len))};
    json::Array sent_tools = shuffled(tools, rng).as_array();
    std::reverse(sent_tools.begin(), sent_tools.end());
    for (std::size_t i = sent_tools.size(); i > 1; --i) {
      std::swap(sent_tools[i - 1], sent_tools[rng.below(i)]);
    }
    Session s;
    s.turns.push_back(Turn{Api::kChatCompletions,
                           chat_body(o.model, std::move(messages), &sent_tools, o.output_len),
                           o.output_len, 0});
    w.sessions.push_back(std::move(s));
  }
  return w;
}

}  // namespace prefixgate::bench
