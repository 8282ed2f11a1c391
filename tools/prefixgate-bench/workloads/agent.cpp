// agent: an agent framework's tool-call loop. Every request carries the same large tool list
// (`tools` schemas with long descriptions) and system prompt; a run starts with a task and
// then repeats: the model calls a tool, the tool's result is appended, the model is asked again.
// So each step's prompt extends the last one, and every run shares the tools and system prefix.
// The loop is written in the API the options name: Chat Completions, Anthropic Messages (with
// cache_control on the system prompt and on the newest tool result, as coding agents mark them)
// or OpenAI Responses (function_call and function_call_output items).
#include "workloads/chat.h"
#include "workloads/workloads.h"

namespace prefixgate::bench {

namespace {

struct Tool {
  std::string name, description;
  json::Value parameters;
};

std::vector<Tool> make_tools(Rng& rng, const AgentOptions& o) {
  std::vector<Tool> tools;
  for (std::size_t i = 0; i < o.tools; ++i) {
    json::Object params{
        {"type", "object"},
        {"properties",
         json::Object{
             {"query", json::Object{{"type", "string"}, {"description", random_text(rng, 48)}}},
             {"limit", json::Object{{"type", "integer"}, {"minimum", 1}}},
             {"filters", json::Object{{"type", "object"}, {"description", random_text(rng, 64)}}}}},
        {"required", json::Array{"query"}}};
    tools.push_back(
        Tool{"tool_" + std::to_string(i), random_text(rng, o.tool_schema_len), std::move(params)});
  }
  return tools;
}

// One tool round trip: the model's call and the tool's result.
struct Step {
  std::string call_id, tool, query, result;
};

struct Conversation {
  std::string system, task;
  std::vector<Step> steps;
};

std::string arguments(const Step& s) {
  return json::to_json(json::Object{{"query", s.query}});
}

std::string chat_request(const AgentOptions& o, const std::vector<Tool>& tools,
                         const Conversation& c) {
  json::Array list;
  for (const Tool& t : tools) {
    list.push_back(json::Object{{"type", "function"},
                                {"function", json::Object{{"name", t.name},
                                                          {"description", t.description},
                                                          {"parameters", t.parameters}}}});
  }
  json::Array history{chat_message("system", c.system), chat_message("user", c.task)};
  for (const Step& s : c.steps) {
    json::Object call{{"id", s.call_id},
                      {"type", "function"},
                      {"function", json::Object{{"name", s.tool}, {"arguments", arguments(s)}}}};
    history.push_back(json::Object{
        {"role", "assistant"}, {"content", ""}, {"tool_calls", json::Array{std::move(call)}}});
    history.push_back(
        json::Object{{"role", "tool"}, {"tool_call_id", s.call_id}, {"content", s.result}});
  }
  return chat_body(o.model, std::move(history), &list, o.output_len);
}

std::string messages_request(const AgentOptions& o, const std::vector<Tool>& tools,
                             const Conversation& c) {
  const json::Value ephemeral = json::Object{{"type", "ephemeral"}};
  json::Array list;
  for (const Tool& t : tools) {
    list.push_back(json::Object{
        {"name", t.name}, {"description", t.description}, {"input_schema", t.parameters}});
  }
  json::Array messages{json::Object{{"role", "user"}, {"content", c.task}}};
  for (std::size_t i = 0; i < c.steps.size(); ++i) {
    const Step& s = c.steps[i];
    messages.push_back(json::Object{
        {"role", "assistant"},
        {"content", json::Array{json::Object{{"type", "tool_use"},
                                             {"id", s.call_id},
                                             {"name", s.tool},
                                             {"input", json::Object{{"query", s.query}}}}}}});
    json::Object result{{"type", "tool_result"}, {"tool_use_id", s.call_id}, {"content", s.result}};
    if (i + 1 == c.steps.size()) result.push_back({"cache_control", ephemeral});
    messages.push_back(json::Object{{"role", "user"}, {"content", json::Array{std::move(result)}}});
  }
  json::Object body{
      {"model", o.model},
      {"max_tokens", static_cast<double>(o.output_len)},
      {"system", json::Array{json::Object{
                     {"type", "text"}, {"text", c.system}, {"cache_control", ephemeral}}}},
      {"tools", std::move(list)},
      {"messages", std::move(messages)},
      {"temperature", 0},
      {"ignore_eos", true}};
  return json::to_json(json::Value(std::move(body)));
}

std::string responses_request(const AgentOptions& o, const std::vector<Tool>& tools,
                              const Conversation& c) {
  json::Array list;
  for (const Tool& t : tools) {
    list.push_back(json::Object{{"type", "function"},
                                {"name", t.name},
                                {"description", t.description},
                                {"parameters", t.parameters}});
  }
  json::Array input{json::Object{{"role", "user"}, {"content", c.task}}};
  for (const Step& s : c.steps) {
    input.push_back(json::Object{{"type", "function_call"},
                                 {"call_id", s.call_id},
                                 {"name", s.tool},
                                 {"arguments", arguments(s)}});
    input.push_back(json::Object{
        {"type", "function_call_output"}, {"call_id", s.call_id}, {"output", s.result}});
  }
  json::Object body{{"model", o.model},
                    {"instructions", c.system},
                    {"tools", std::move(list)},
                    {"input", std::move(input)},
                    {"max_output_tokens", static_cast<double>(o.output_len)},
                    {"temperature", 0},
                    {"ignore_eos", true}};
  return json::to_json(json::Value(std::move(body)));
}

std::string request(const AgentOptions& o, const std::vector<Tool>& tools, const Conversation& c) {
  switch (o.api) {
    case Api::kMessages: return messages_request(o, tools, c);
    case Api::kResponses: return responses_request(o, tools, c);
    case Api::kCompletions:
    case Api::kChatCompletions: break;
  }
  return chat_request(o, tools, c);
}

}  // namespace

Workload make_agent(const AgentOptions& o, std::uint64_t seed) {
  Rng rng(seed);
  Workload w;
  w.name = "agent";
  const Api api = o.api == Api::kCompletions ? Api::kChatCompletions : o.api;
  const std::vector<Tool> tools = make_tools(rng, o);
  const std::string system = random_text(rng, o.system_len);
  for (std::size_t a = 0; a < o.agents; ++a) {
    Session s;
    Conversation c{system, random_text(rng, o.task_len), {}};
    for (std::size_t step = 0; step < o.steps; ++step) {
      const double think = step == 0 ? 0 : rng.exponential(o.think_time_s);
      s.turns.push_back(Turn{api, request(o, tools, c), o.output_len, think});
      Step next;
      next.call_id = (api == Api::kMessages ? "toolu_" : "call_") + std::to_string(a) + "_" +
                     std::to_string(step);
      next.tool = "tool_" + std::to_string(rng.below(o.tools));
      next.query = random_text(rng, 24);
      next.result = random_text(rng, o.tool_result_len);
      c.steps.push_back(std::move(next));
    }
    w.sessions.push_back(std::move(s));
  }
  return w;
}

}  // namespace prefixgate::bench
