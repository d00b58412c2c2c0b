#!/usr/bin/env python3
"""One table from the A/B logs of scripts/gpu-run-branches.sh (ab.<build>.<round>.log, each a
cuda_decode_bench run): per weight format and row (decode: batch x context, graphed; prefill:
sequences x tokens) and per build, the median over the rounds of each round's median with the
min-max of those medians (decode: step ms; prefill: tokens/s), and each build against the last
build named (the reference: `--ab "new other main"`). Usage: ab_summary.py LOG_DIR BUILD..."""
import re
import statistics
import sys
from pathlib import Path


def rows_of(text):
    """{(format, kind, shape): value} of one bench log."""
    out = {}
    fmt = "?"
    for line in text.splitlines():
        m = re.match(r"^## weights: (\S+)", line)
        if m:
            fmt = m.group(1)
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")] if line.startswith("|") else []
        if len(cells) >= 4 and cells[2] == "yes" and cells[0].isdigit() and cells[1].isdigit():
            ms = re.match(r"([0-9.]+)", cells[3])
            if ms:
                out[(fmt, "decode ms", f"b{cells[0]} ctx {cells[1]}")] = float(ms.group(1))
        elif len(cells) == 4 and cells[0].isdigit() and cells[1].isdigit() and re.match(r"[0-9.]+ \(", cells[2]):
            out[(fmt, "prefill tok/s", f"{cells[0]} x {cells[1]}")] = float(cells[3])
    return out


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    log_dir, builds = Path(sys.argv[1]), sys.argv[2:]
    per = {}  # (row, build) -> [value per round]
    for b in builds:
        for f in sorted(log_dir.glob(f"ab.{b}.*.log")):
            for row, v in rows_of(f.read_text(errors="replace")).items():
                per.setdefault((row, b), []).append(v)
    rows = sorted({row for row, _ in per}, key=lambda r: (r[0], r[1], [int(n) for n in re.findall(r"\d+", r[2])]))
    if not rows:
        print("ab_summary: no bench rows in", log_dir)
        return
    ref = builds[-1]
    print("| weights | row | " + " | ".join(builds) + " |")
    print("| --- | --- |" + " ---: |" * len(builds))
    for row in rows:
        cells = []
        ref_vals = per.get((row, ref))
        for b in builds:
            vals = per.get((row, b))
            if not vals:
                cells.append("-")
                continue
            med = statistics.median(vals)
            cell = f"{med:.3f} ({min(vals):.3f}-{max(vals):.3f}, {len(vals)})" if row[1] == "decode ms" else \
                f"{med:.0f} ({min(vals):.0f}-{max(vals):.0f}, {len(vals)})"
            if b != ref and ref_vals:
                cell += f" {100.0 * (med / statistics.median(ref_vals) - 1.0):+.1f}%"
            cells.append(cell)
        print(f"| {row[0]} | {row[1]} {row[2]} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
