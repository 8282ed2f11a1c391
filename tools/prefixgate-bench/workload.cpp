#include "workload.h"

#include <cmath>

#include "prefixgate/canonicalize/json.h"

namespace prefixgate::bench {

canon::Api canon_api(Api api) {
  switch (api) {
    case Api::kCompletions: return canon::Api::kCompletions;
    case Api::kChatCompletions: return canon::Api::kChatCompletions;
    case Api::kMessages: return canon::Api::kMessages;
    case Api::kResponses: return canon::Api::kResponses;
  }
  return canon::Api::kChatCompletions;
}

const char* api_path(Api api) {
  return canon::api_path(canon_api(api));
}

std::size_t Workload::requests() const {
  std::size_t n = 0;
  for (const Session& s : sessions) n += s.turns.size();
  return n;
}

std::uint64_t Rng::next() {
  std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

std::uint64_t Rng::below(std::uint64_t n) {
  return next() % n;
}  // bias < n / 2^64: irrelevant

double Rng::uniform() {
  return static_cast<double>(next() >> 11) * 0x1.0p-53;
}

double Rng::exponential(double mean) {
  return -mean * std::log1p(-uniform());
}

std::string random_text(Rng& rng, std::size_t length) {
  std::string out;
  out.reserve(length);
  while (out.size() < length) {
    const std::size_t word = 2 + rng.below(8);
    for (std::size_t i = 0; i < word && out.size() < length; ++i) {
      out.push_back(static_cast<char>('a' + rng.below(26)));
    }
    if (out.size() < length) out.push_back(' ');
  }
  return out;
}

std::string completion_body(const std::string& model, const std::string& prompt,
                            std::size_t max_tokens) {
  json::Object body{{"model", model},
                    {"prompt", prompt},
                    {"max_tokens", static_cast<double>(max_tokens)},
                    {"temperature", 0},
                    {"ignore_eos", true}};
  return json::to_json(json::Value(std::move(body)));
}

}  // namespace prefixgate::bench
