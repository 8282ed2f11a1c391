// shared-prefix: SGLang's generated-shared-prefix workload (bench_serving.py
// `sample_generated_shared_prefix_requests`): `groups` system prompts of `system_len` tokens,
// `prompts_per_group` questions of `question_len` tokens under each, prompt = system + "\n\n" +
// question, every request asks for `output_len` tokens, and the requests are shuffled so groups
// interleave as independent users would.
#include <utility>

#include "workloads/workloads.h"

namespace prefixgate::bench {

Workload make_shared_prefix(const SharedPrefixOptions& o, std::uint64_t seed) {
  Rng rng(seed);
  Workload w;
  w.name = "shared-prefix";
  w.sessions.reserve(o.groups * o.prompts_per_group);
  for (std::size_t g = 0; g < o.groups; ++g) {
    const std::string system = random_text(rng, o.system_len);
    for (std::size_t p = 0; p < o.prompts_per_group; ++p) {
      const std::string prompt = system + "\n\n" + random_text(rng, o.question_len);
      Session s;
      s.turns.push_back(
          Turn{Api::kCompletions, completion_body(o.model, prompt, o.output_len), o.output_len, 0});
      w.sessions.push_back(std::move(s));
    }
  }
  for (std::size_t i = w.sessions.size(); i > 1; --i) {  // Fisher-Yates
    std::swap(w.sessions[i - 1], w.sessions[rng.below(i)]);
  }
  return w;
}

}  // namespace prefixgate::bench
