// Traffic for the dashboard tests (/stats format, the browser test): three tenants whose
// prompts exercise every panel. "support" streams requests sharing a long system prompt (cache
// hits, TTFT of hits); "shop" puts the current time in its system prompt (a prefix-breaking
// finding, misses); "docs" sends tools whose JSON schema is not canonical (canonicalization
// rewrites it). Needs a gateway started with write_dashboard_config().
#pragma once

#include <string>

#include "gateway_server/processes.h"
#include "prefixgate/canonicalize/json.h"

namespace prefixgate::gateway::testing {

inline std::string write_dashboard_config() {
  return write_config("dashboard", "tenant_header: x-tenant\npolicy: cache_aware\n");
}

inline std::string dashboard_chat(const std::string& system, const std::string& user, bool stream,
                                  const std::string& extra = {}) {
  json::Object body{{"model", "builtin:tiny"},
                    {"messages", json::Array{json::Object{{"role", "system"}, {"content", system}},
                                             json::Object{{"role", "user"}, {"content", user}}}},
                    {"max_tokens", 4},
                    {"temperature", 0}};
  if (stream) body.push_back({"stream", true});
  std::string out = json::to_json(body);
  if (!extra.empty()) out.insert(out.size() - 1, "," + extra);
  return out;
}

inline std::string dashboard_system_prompt(const std::string& team) {
  std::string s = "You are the " + team + " assistant. Follow these rules carefully. ";
  for (int i = 0; i < 16; ++i) {
    s += "Rule " + std::to_string(i) + " for " + team +
         ": answer politely, cite the manual section, never invent facts. ";
  }
  return s;
}

// Sends `rounds` rounds of the three tenants' requests, `pause` apart (so that the dashboard's
// one-second samples have something to draw); returns how many answered 200.
inline int send_dashboard_traffic(std::uint16_t port, int rounds,
                                  std::chrono::milliseconds pause = std::chrono::milliseconds(0)) {
  int ok = 0;
  const std::string tools =
      R"("tools":[{"type":"function","function":{"name":"search_docs","description":"Search the manual",)"
      R"("parameters":{"type":"object","required":["query"],"properties":{"query":{"type":"string"},)"
      R"("limit":{"type":"integer"}}}}}])";
  for (int i = 0; i < rounds; ++i) {
    if (i > 0) std::this_thread::sleep_for(pause);
    const std::string q = "Question " + std::to_string(i) + ": how do I reset my password?";
    const Reply a = post(port, "/v1/chat/completions",
                         dashboard_chat(dashboard_system_prompt("support"), q, true),
                         {{"x-tenant", "support"}});
    ok += a.status == 200 ? 1 : 0;
    const std::string now = "Current time: 2026-08-20T09:" + std::to_string(10 + i) + ":" +
                            std::to_string(10 + 3 * i) + "Z. ";
    const Reply b = post(port, "/v1/chat/completions",
                         dashboard_chat(now + dashboard_system_prompt("shop"), q, true),
                         {{"x-tenant", "shop"}});
    ok += b.status == 200 ? 1 : 0;
    const Reply c = post(port, "/v1/chat/completions",
                         dashboard_chat(dashboard_system_prompt("docs"), q, false, tools),
                         {{"x-tenant", "docs"}});
    ok += c.status == 200 ? 1 : 0;
  }
  return ok;
}

// Polls /stats until its totals count `requests` completions (the sampler closes an interval
// every second). Returns the last /stats body. `headers`: the admin key, when there is one.
inline std::string wait_stats_requests(std::uint16_t port, int requests,
                                       std::chrono::seconds timeout = std::chrono::seconds(20),
                                       const std::map<std::string, std::string>& headers = {}) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string body;
  while (std::chrono::steady_clock::now() < deadline) {
    const Reply r = call(port, http::verb::get, "/stats", {}, headers);
    body = r.body;
    if (auto doc = json::parse(r.body); doc && doc->is_object()) {
      const json::Value* totals = doc->find("totals");
      const json::Value* n = totals ? totals->find("requests") : nullptr;
      if (n && n->is_number() && n->as_number().value >= requests) return body;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // polling, not synchronizing
  }
  return body;
}

}  // namespace prefixgate::gateway::testing
