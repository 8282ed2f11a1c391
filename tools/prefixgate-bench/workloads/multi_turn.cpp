// multi-turn: chat conversations that grow turn by turn. Every conversation shares one system
// prompt (one app), and each turn appends the previous answer and a new user message, so turn
// k+1's prompt extends turn k's. The appended answer is a stand-in of `output_len` tokens drawn
// here, not the model's reply: the sim's replies are noise, and a fixed history keeps the
// workload reproducible and its ceiling computable before the run. The engine caches prompt
// pages, so what turn k+1 can reuse is turn k's prompt either way.
#include "workloads/chat.h"
#include "workloads/workloads.h"

namespace prefixgate::bench {

Workload make_multi_turn(const MultiTurnOptions& o, std::uint64_t seed) {
  Rng rng(seed);
  Workload w;
  w.name = "multi-turn";
  const std::string system = random_text(rng, o.system_len);
  for (std::size_t c = 0; c < o.conversations; ++c) {
    Session s;
    json::Array history{chat_message("system", system)};
    for (std::size_t t = 0; t < o.turns; ++t) {
      history.push_back(chat_message("user", random_text(rng, o.user_len)));
      const double think = t == 0 ? 0 : rng.exponential(o.think_time_s);
      s.turns.push_back(Turn{Api::kChatCompletions,
                             chat_body(o.model, history, nullptr, o.output_len), o.output_len,
                             think});
      history.push_back(chat_message("assistant", random_text(rng, o.output_len)));
    }
    w.sessions.push_back(std::move(s));
  }
  return w;
}

}  // namespace prefixgate::bench
