// agent: an agent framework's tool-call loop. Every request carries the same large tool list
// (`tools` schemas with long descriptions) and system prompt; a run starts with a task and
// then repeats: the model calls a tool, the tool's result is appended, the model is asked again.
// So each step's prompt extends the last one, and every run shares the tools and system prefix.
#include "workloads/chat.h"
#include "workloads/workloads.h"

namespace prefixgate::bench {

namespace {

json::Array make_tools(Rng& rng, const AgentOptions& o) {
  json::Array tools;
  for (std::size_t i = 0; i < o.tools; ++i) {
    json::Object params{
        {"type", "object"},
        {"properties",
         json::Object{
             {"query", json::Object{{"type", "string"}, {"description", random_text(rng, 48)}}},
             {"limit", json::Object{{"type", "integer"}, {"minimum", 1}}},
             {"filters", json::Object{{"type", "object"}, {"description", random_text(rng, 64)}}}}},
        {"required", json::Array{"query"}}};
    json::Object fn{{"name", "tool_" + std::to_string(i)},
                    {"description", random_text(rng, o.tool_schema_len)},
                    {"parameters", std::move(params)}};
    tools.push_back(json::Object{{"type", "function"}, {"function", std::move(fn)}});
  }
  return tools;
}

}  // namespace

Workload make_agent(const AgentOptions& o, std::uint64_t seed) {
  Rng rng(seed);
  Workload w;
  w.name = "agent";
  const json::Array tools = make_tools(rng, o);
  const std::string system = random_text(rng, o.system_len);
  for (std::size_t a = 0; a < o.agents; ++a) {
    Session s;
    json::Array history{chat_message("system", system),
                        chat_message("user", random_text(rng, o.task_len))};
    for (std::size_t step = 0; step < o.steps; ++step) {
      const double think = step == 0 ? 0 : rng.exponential(o.think_time_s);
      s.turns.push_back(Turn{Api::kChatCompletions,
                             chat_body(o.model, history, &tools, o.output_len), o.output_len,
                             think});
      const std::string call_id = "call_" + std::to_string(a) + "_" + std::to_string(step);
      const std::string tool = "tool_" + std::to_string(rng.below(o.tools));
      json::Object call{
          {"id", call_id},
          {"type", "function"},
          {"function",
           json::Object{{"name", tool},
                        {"arguments", "{\"query\":\"" + random_text(rng, 24) + "\"}"}}}};
      history.push_back(json::Object{
          {"role", "assistant"}, {"content", ""}, {"tool_calls", json::Array{std::move(call)}}});
      history.push_back(json::Object{{"role", "tool"},
                                     {"tool_call_id", call_id},
                                     {"content", random_text(rng, o.tool_result_len)}});
    }
    w.sessions.push_back(std::move(s));
  }
  return w;
}

}  // namespace prefixgate::bench
