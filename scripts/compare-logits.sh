#!/usr/bin/env bash
# Compares two logits files written by `tandem-infer logits --out` (safetensors with one float32
# tensor) with coreutils + awk only (the GPU machine has no numpy):
#   rel = max |a - b| / max |a|   (a = the reference, the first file)
# Prints "values=N max_abs_diff=D max_abs_ref=R rel=X" and exits 1 when rel > TOL (default 1e-2)
# or the files differ in size. Usage: scripts/compare-logits.sh REF.safetensors OTHER.safetensors [TOL]
set -euo pipefail
ref=$1 other=$2 tol=${3:-1e-2}
# Data starts after the 8-byte little-endian header length and the JSON header.
data_offset() { echo $((8 + $(od -An -t u8 -N 8 "$1" | tr -d ' '))); }
ra=$(data_offset "$ref") rb=$(data_offset "$other")
na=$(( $(stat -c %s "$ref") - ra )) nb=$(( $(stat -c %s "$other") - rb ))
if [[ $na != "$nb" ]]; then
  echo "size differs: $ref has $((na / 4)) floats, $other $((nb / 4))"
  exit 1
fi
floats() { od -An -v -t f4 -j "$2" "$1" | tr -s ' \t' '\n' | sed '/^$/d'; }
paste <(floats "$ref" "$ra") <(floats "$other" "$rb") | awk -v tol="$tol" '
  function abs(x) { return x < 0 ? -x : x }
  { n++; d = abs($1 - $2); if (d > md) md = d; if (abs($1) > mr) mr = abs($1); if ($1 ~ /nan|inf/ || $2 ~ /nan|inf/) nan++ }
  END {
    rel = mr > 0 ? md / mr : md
    printf "values=%d max_abs_diff=%.6g max_abs_ref=%.6g rel=%.6g%s\n", n, md, mr, rel, nan ? " NaN!" : ""
    exit (rel <= tol + 0 && !nan) ? 0 : 1
  }'
