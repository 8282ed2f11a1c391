// What prefixgate-bench sends: a workload is a list of sessions, each a sequence of turns (one
// HTTP request each). A single-turn workload (shared-prefix, a trace) has one turn per session;
// a conversation (multi-turn, agent) sends turn k+1 only after turn k's response, plus a think
// time. Every generator is seeded: the same options give byte-identical requests.
//
//   bench::SharedPrefixOptions o{.groups = 64, .prompts_per_group = 16};
//   bench::Workload w = bench::make_shared_prefix(o, /*seed=*/1);
//   for (const bench::Session& s : w.sessions) send(s.turns[0].body);
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "prefixgate/canonicalize/chat_conversion.h"

namespace prefixgate::bench {

enum class Api { kCompletions, kChatCompletions, kMessages, kResponses };
// "/v1/completions", "/v1/chat/completions", "/v1/messages" (Anthropic), "/v1/responses".
const char* api_path(Api api);
// The request shape a Turn's body has, as the canonicalize/ parsers know it.
canon::Api canon_api(Api api);

struct Turn {
  Api api = Api::kCompletions;
  // The JSON request body without `stream`/`stream_options` (the client adds them). Compact JSON
  // starting with '{'.
  std::string body;
  std::size_t max_tokens = 0;
  double think_time_s = 0;  // wait after the previous turn's response before sending this one
};

struct Session {
  // Arrival offset from the start of the run in seconds (a trace's timestamp); negative: the
  // load generator decides (Poisson arrivals or a closed loop).
  double arrival_s = -1;
  std::vector<Turn> turns;
};

struct Workload {
  std::string name;
  std::vector<Session> sessions;
  std::size_t requests() const;
};

// Deterministic pseudo-random numbers for the generators (SplitMix64: tiny, fast, and the same
// on every platform, unlike std::uniform_int_distribution).
class Rng {
 public:
  explicit Rng(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next();
  std::uint64_t below(std::uint64_t n);  // uniform in [0, n), n > 0
  double uniform();                      // [0, 1)
  double exponential(double mean);

 private:
  std::uint64_t state_;
};

// `length` bytes of printable ASCII words (lower-case letters and spaces). With the byte
// tokenizer (the builtin models) one byte is one token, so lengths are in tokens.
std::string random_text(Rng& rng, std::size_t length);

// A completion body: {"model":..,"prompt":"..","max_tokens":N,"temperature":0,"ignore_eos":true}.
std::string completion_body(const std::string& model, const std::string& prompt,
                            std::size_t max_tokens);

}  // namespace prefixgate::bench
