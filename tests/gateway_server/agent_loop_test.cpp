// An agent's tool loop over /v1/messages through the gateway in front of four prefixgate-engine
// replicas: every step resends the system prompt, the tools and the growing history, and each
// step's cache_read_input_tokens covers the whole blocks of the previous step's prompt (one
// replica keeps the conversation). The same conversation then continues over Chat Completions
// and lands on that replica's cache.
#include <gtest/gtest.h>

#include <iostream>

#include "gateway_server/processes.h"
#include "prefixgate/canonicalize/json.h"

namespace prefixgate::gateway::testing {
namespace {

constexpr std::size_t kSteps = 6;
constexpr std::size_t kBlock = 16;

std::string repeat(std::string_view text, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += text;
  return out;
}

const std::string kSystem = repeat("You are a coding agent in a large C++ repository. ", 10);
const std::string kTask = "Find where requests are routed and explain the cost formula.";

// One tool call and its result, as the loop appends them after each step.
struct Turn {
  std::string text, id, pattern, result;
};

Turn turn(std::size_t k) {
  return Turn{"Step " + std::to_string(k) + ".", "toolu_" + std::to_string(k),
              "route" + std::to_string(k),
              repeat("gateway/src/routing_cache_aware.cpp: cost(r) = prefill + load; ", 3)};
}

json::Value tool(std::string name, std::string description, const char* schema_key) {
  json::Value schema =
      json::Object{{"type", "object"},
                   {"properties", json::Object{{"pattern", json::Object{{"type", "string"}}}}}};
  return json::Object{{"name", std::move(name)},
                      {"description", std::move(description)},
                      {schema_key, std::move(schema)}};
}

// The Messages request after `turns` tool round trips, breakpoints on the system prompt and on
// the newest block (as agents mark them).
std::string messages_request(const std::vector<Turn>& turns) {
  json::Array messages{json::Object{{"role", "user"}, {"content", kTask}}};
  for (const Turn& t : turns) {
    messages.push_back(json::Object{
        {"role", "assistant"},
        {"content", json::Array{json::Object{{"type", "text"}, {"text", t.text}},
                                json::Object{{"type", "tool_use"},
                                             {"id", t.id},
                                             {"name", "grep"},
                                             {"input", json::Object{{"pattern", t.pattern}}}}}}});
    messages.push_back(json::Object{
        {"role", "user"},
        {"content", json::Array{json::Object{
                        {"type", "tool_result"}, {"tool_use_id", t.id}, {"content", t.result}}}}});
  }
  json::Value& newest = messages.back();
  if (json::Value* content = newest.find("content"); content != nullptr && content->is_array()) {
    content->as_array().back().set("cache_control", json::Object{{"type", "ephemeral"}});
  }
  return json::to_json(json::Object{
      {"model", "builtin:tiny"},
      {"max_tokens", 4},
      {"system", json::Array{json::Object{{"type", "text"},
                                          {"text", kSystem},
                                          {"cache_control", json::Object{{"type", "ephemeral"}}}}}},
      {"tools", json::Array{tool("grep", "Searches the repository for a pattern", "input_schema"),
                            tool("read_file", "Reads a file", "input_schema")}},
      {"messages", std::move(messages)}});
}

// The same conversation as a Chat Completions client sends it.
std::string chat_request(const std::vector<Turn>& turns) {
  json::Array messages{json::Object{{"role", "system"}, {"content", kSystem}},
                       json::Object{{"role", "user"}, {"content", kTask}}};
  for (const Turn& t : turns) {
    messages.push_back(json::Object{
        {"role", "assistant"},
        {"content", t.text},
        {"tool_calls", json::Array{json::Object{
                           {"id", t.id},
                           {"type", "function"},
                           {"function", json::Object{{"name", "grep"},
                                                     {"arguments", R"({"pattern":")" + t.pattern +
                                                                       R"("})"}}}}}}});
    messages.push_back(
        json::Object{{"role", "tool"}, {"tool_call_id", t.id}, {"content", t.result}});
  }
  const auto function = [](json::Value t) {
    return json::Object{{"type", "function"}, {"function", std::move(t)}};
  };
  return json::to_json(json::Object{
      {"model", "builtin:tiny"},
      {"max_tokens", 4},
      {"messages", std::move(messages)},
      {"tools",
       json::Array{function(tool("grep", "Searches the repository for a pattern", "parameters")),
                   function(tool("read_file", "Reads a file", "parameters"))}}});
}

double field(const json::Value& v, std::string_view key) {
  const json::Value* f = v.find(key);
  return f != nullptr && f->is_number() ? f->as_number().value : -1;
}

TEST(AgentLoopTest, EachStepReadsThePreviousPromptFromCacheAndChatSharesIt) {
  std::vector<std::unique_ptr<Process>> engines;
  std::vector<std::string> args;
  for (int i = 0; i < 4; ++i) {
    std::uint16_t p = 0;
    engines.push_back(start_engine(p));
    ASSERT_NE(p, 0);
    args.insert(args.end(), {"--upstream", upstream(p)});
  }
  std::uint16_t port = 0;
  auto gw = start_gateway(port, args);
  ASSERT_NE(port, 0) << gw->output();
  ASSERT_TRUE(wait_healthy(port, 4));

  std::vector<Turn> turns;
  std::string replica;
  double previous_prompt = 0, read_total = 0, prompt_total = 0;
  for (std::size_t step = 0; step < kSteps; ++step) {
    const Reply r = post(port, "/v1/messages", messages_request(turns));
    ASSERT_EQ(r.status, 200) << r.body;
    auto body = json::parse(r.body);
    ASSERT_TRUE(body) << r.body;
    const json::Value& usage = *body->find("usage");
    const double read = field(usage, "cache_read_input_tokens");
    const double prompt =
        field(usage, "input_tokens") + read + field(usage, "cache_creation_input_tokens");
    if (step == 0) {
      replica = r.header("x-prefixgate-replica");
      EXPECT_EQ(read, 0);
      EXPECT_GT(field(usage, "cache_creation_input_tokens"), static_cast<double>(kSystem.size()));
    } else {
      EXPECT_EQ(r.header("x-prefixgate-replica"), replica) << "step " << step;
      // The previous step's prompt is a prefix of this one: all its whole blocks are read.
      const double whole_blocks =
          static_cast<double>(static_cast<std::size_t>(previous_prompt) / kBlock * kBlock);
      EXPECT_GE(read, whole_blocks) << "step " << step;
    }
    read_total += read;
    prompt_total += prompt;
    previous_prompt = prompt;
    turns.push_back(turn(step));
  }
  const double hit_rate = read_total / prompt_total;
  std::cout << "agent loop over /v1/messages, " << kSteps << " steps: " << read_total << " of "
            << prompt_total << " prompt tokens read from cache (hit rate " << hit_rate * 100
            << " %)\n";
  RecordProperty("messages_loop_hit_rate_percent", static_cast<int>(hit_rate * 100));
  // The first step is cold; every later one reads all but its newest turn.
  EXPECT_GT(hit_rate, 0.6);

  // The conversation continues over Chat Completions: the same replica, the same cache.
  const Reply chat = post(port, "/v1/chat/completions", chat_request(turns));
  ASSERT_EQ(chat.status, 200) << chat.body;
  EXPECT_EQ(chat.header("x-prefixgate-replica"), replica);
  EXPECT_EQ(chat.header("x-prefixgate-route-reason"), "cache_hit");
  auto chat_body = json::parse(chat.body);
  ASSERT_TRUE(chat_body);
  const json::Value& usage = *chat_body->find("usage");
  const double cached = field(*usage.find("prompt_tokens_details"), "cached_tokens");
  EXPECT_GE(cached,
            static_cast<double>(static_cast<std::size_t>(previous_prompt) / kBlock * kBlock));
  std::cout << "chat request after the loop: " << cached << " of " << field(usage, "prompt_tokens")
            << " prompt tokens read from the same replica's cache\n";
}

}  // namespace
}  // namespace prefixgate::gateway::testing
