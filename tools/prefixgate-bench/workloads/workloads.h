// The workload generators. Lengths are in tokens of the byte tokenizer (the builtin models:
// one byte, one token); every generator is seeded and reproducible.
//
//   shared-prefix  groups x prompts: each group's prompts share one system prompt and differ in
//                  their question (SGLang's generated-shared-prefix: `system + "\n\n" + question`,
//                  all requests shuffled), sent as text completions
//   multi-turn     conversations of chat turns, each turn appends the previous answer and a new
//                  user message to the history, with think time between turns
//   agent          a large tool schema list and a loop of tool calls and tool results, in the
//                  Chat Completions, Anthropic Messages or OpenAI Responses API
//   volatile       one app's single-turn chats whose system prompt carries the current time (to
//                  the second) and whose tools are serialized with shuffled key order
//   trace          a Mooncake-format JSONL trace replayed as token-id prompts (trace.h)
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "workload.h"

namespace prefixgate::bench {

struct SharedPrefixOptions {
  std::size_t groups = 64;
  std::size_t prompts_per_group = 16;
  std::size_t system_len = 2048;
  std::size_t question_len = 128;
  std::size_t output_len = 256;
  std::string model = "builtin:tiny";
};
Workload make_shared_prefix(const SharedPrefixOptions& o, std::uint64_t seed);

struct MultiTurnOptions {
  std::size_t conversations = 64;
  std::size_t turns = 8;
  std::size_t system_len = 1024;  // one system prompt shared by every conversation (one app)
  std::size_t user_len = 128;     // each user message
  std::size_t output_len = 128;   // max_tokens, and the length of the stand-in answer appended
  double think_time_s = 1.0;      // mean (exponential) wait between a response and the next turn
  std::string model = "builtin:tiny";
};
Workload make_multi_turn(const MultiTurnOptions& o, std::uint64_t seed);

struct AgentOptions {
  std::size_t agents = 32;            // concurrent agent runs (sessions)
  std::size_t steps = 8;              // tool-call iterations per run
  std::size_t tools = 16;             // tool schemas in every request
  std::size_t tool_schema_len = 400;  // description text per tool
  std::size_t system_len = 512;
  std::size_t task_len = 256;         // the user's task
  std::size_t tool_result_len = 256;  // each tool result
  std::size_t output_len = 64;
  double think_time_s = 0.2;  // tool execution time (mean, exponential)
  std::string model = "builtin:tiny";
  Api api = Api::kChatCompletions;  // kChatCompletions, kMessages or kResponses
};
Workload make_agent(const AgentOptions& o, std::uint64_t seed);

struct VolatileOptions {
  std::size_t requests = 512;
  std::size_t system_len = 2048;
  std::size_t tools = 8;
  std::size_t question_len = 128;
  std::size_t output_len = 128;
  double seconds_between_requests = 1.3;  // how far the timestamp advances per request
  std::string model = "builtin:tiny";
};
Workload make_volatile(const VolatileOptions& o, std::uint64_t seed);

}  // namespace prefixgate::bench
