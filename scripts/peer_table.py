#!/usr/bin/env python3
"""Issue 21's final table: tandem's GPU bench beside llama.cpp, measured in one run (A, peer, B).

Reads three saved outputs of one device call:
  A, B  `cuda_decode_bench --synthetic qwen3-30b-a3b ...` (before and after the peer)
  PEER  `../shared/peer/run.sh bench` (llama-bench and llama-batched-bench markdown rows)
and prints one markdown table: each case with tandem A and B (tokens/s, the bench's medians), the
share of the copy bandwidth measured in A, llama.cpp's tokens/s and the same share computed with
tandem's bytes per step (as ../shared/peer/README.md does), and tandem / llama.cpp: the ratio of the
mean of A and B, with the range A / peer .. B / peer. A case missing from any input is an error
naming it: a table with a hole would read as a result.

Usage: peer_table.py A.txt PEER.txt B.txt
"""
import re
import statistics
import sys


class TableError(Exception):
    pass


def cells(line):
    return [c.strip() for c in line.strip().strip("|").split("|")]


def parse_tandem(text, name):
    """Decode rows {(batch, ctx): (tok/s, GB/step)}, prefill rows {(seqs, tokens): tok/s}, copy GB/s."""
    m = re.search(r"device-to-device copy .*?median (\d+(?:\.\d+)?) GB/s", text)
    if not m:
        raise TableError(f"{name}: no 'device-to-device copy ... median N GB/s' line (not a cuda_decode_bench output?)")
    copy = float(m.group(1))
    decode, prefill = {}, {}
    # Only the first format section (bf16 unless --weights says otherwise) is the peer's shape.
    sections = re.split(r"\n## weights: ", text)
    body = sections[1] if len(sections) > 1 else text
    for line in body.splitlines():
        if not line.startswith("| "):
            continue
        c = cells(line)
        if len(c) == 11 and c[2] == "yes" and c[0].isdigit():
            decode[(int(c[0]), int(c[1]))] = (float(c[4]), float(c[8]))
        elif len(c) == 4 and c[0].isdigit() and c[1].isdigit():
            prefill[(int(c[0]), int(c[1]))] = float(c[3])
    return copy, decode, prefill


def parse_peer(text):
    """llama-bench rows {test: t/s} (e.g. 'tg128 @ d1024', 'pp2048') and batched rows {B: (S_PP, S_TG)}."""
    bench, batched = {}, {}
    for line in text.splitlines():
        if not line.startswith("|") or set(line) <= set("|-: "):
            continue
        c = cells(line)
        if len(c) >= 2 and re.fullmatch(r"(pp|tg)\d+( @ d\d+)?", c[-2]):
            bench[c[-2]] = float(c[-1].split("±")[0])
        elif len(c) == 10 and c[0].isdigit():
            # | PP | TG | B | N_KV | T_PP s | S_PP t/s | T_TG s | S_TG t/s | T s | S t/s |
            batched[int(c[2])] = (float(c[5]), float(c[7]))
    return bench, batched


# (label, tandem lookup, llama.cpp lookup, batch for the bandwidth share or None for prefill)
CASES = [
    ("decode 1 sequence, context 1k", ("d", 1, 1024), ("bench", "tg128 @ d1024"), 1),
    ("decode 1 sequence, context 4k", ("d", 1, 4096), ("bench", "tg128 @ d4096"), 1),
    ("decode 8 sequences, context 1k", ("d", 8, 1024), ("tg", 8), 8),
    ("decode 32 sequences, context 1k", ("d", 32, 1024), ("tg", 32), 32),
    ("prefill 512 tokens", ("p", 1, 512), ("bench", "pp512"), None),
    ("prefill 2,048 tokens", ("p", 1, 2048), ("bench", "pp2048"), None),
    ("prefill 8 x 1,024 tokens (one step)", ("p", 8, 1024), ("pp", 8), None),
]


def build_table(a_text, peer_text, b_text):
    copy_a, dec_a, pre_a = parse_tandem(a_text, "A")
    _, dec_b, pre_b = parse_tandem(b_text, "B")
    bench, batched = parse_peer(peer_text)
    rows = [
        f"Copy bandwidth measured in A: {copy_a:.0f} GB/s. tandem: medians of its runs (A before the peer, "
        "B after); llama.cpp: llama-bench averages (decode at depth d, 128 tokens) and llama-batched-bench "
        "(1,024-token prompts, 128 generated). Shares of the copy bandwidth use tandem's bytes per step "
        "for both engines.",
        "",
        "| case | tandem A tok/s | tandem B tok/s | tandem of BW | llama.cpp tok/s | llama.cpp of BW | tandem / llama.cpp (A..B) |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for label, (kind, x, y), (pk, key), batch in CASES:
        table_a, table_b = (dec_a, dec_b) if kind == "d" else (pre_a, pre_b)
        for side, table in (("A", table_a), ("B", table_b)):
            if (x, y) not in table:
                raise TableError(f"tandem {side} has no row for '{label}' ({'batch' if kind == 'd' else 'sequences'} {x}, {y})")
        if pk == "bench":
            if key not in bench:
                raise TableError(f"llama.cpp output has no llama-bench row '{key}' for '{label}'")
            peer = bench[key]
        else:
            if key not in batched:
                raise TableError(f"llama.cpp output has no llama-batched-bench row B={key} for '{label}'")
            peer = batched[key][0 if pk == "pp" else 1]
        ta = table_a[(x, y)][0] if kind == "d" else table_a[(x, y)]
        tb = table_b[(x, y)][0] if kind == "d" else table_b[(x, y)]
        if batch is not None:
            gb_step = dec_a[(x, y)][1]
            share_t = f"{100 * gb_step * (ta / batch) / copy_a:.0f}%"
            share_p = f"{100 * gb_step * (peer / batch) / copy_a:.0f}%"
        else:
            share_t = share_p = "-"
        lo, hi = sorted((ta / peer, tb / peer))
        ratio = statistics.mean((ta, tb)) / peer
        rows.append(f"| {label} | {ta:,.0f} | {tb:,.0f} | {share_t} | {peer:,.0f} | {share_p} | "
                    f"**{ratio:.2f}x** ({lo:.2f}-{hi:.2f}) |")
    return "\n".join(rows) + "\n"


def main(argv):
    if len(argv) != 4 or argv[1] in ("-h", "--help"):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    try:
        texts = []
        for path in argv[1:]:
            with open(path, encoding="utf-8", errors="replace") as f:
                texts.append(f.read())
        sys.stdout.write(build_table(*texts))
    except (OSError, TableError, ValueError) as e:
        print(f"peer_table: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
