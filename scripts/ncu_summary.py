#!/usr/bin/env python3
"""One row per profiled kernel launch from Nsight Compute's text report (what scripts/gpu-ncu.sh
asks for): the launch's time and clock, how busy the DRAM was, how many instructions its warps
issued and how far apart, its registers and occupancy, and the stall reasons that cost its warps
the most cycles per issued instruction. Metrics a report lacks print as '-'.

Usage: ncu_summary.py REPORT.txt [--stalls N]   (N stall reasons a row, default 4)
"""
import argparse
import re
import sys

# A launch starts with its signature: two spaces, the kernel, its grid and block, then the
# context, stream and device ("  Kernel(args) (48, 8, 1)x(256, 1, 1), Context 1, Stream 7, ...").
LAUNCH = re.compile(r"^  (\S.*?) \(([\d, ]+)\)x\(([\d, ]+)\), Context \d+, Stream \d+")
# A metric: four spaces, its name, its unit where it has one, its value (ncu's thousands commas).
METRIC = re.compile(r"^    (\S.*?)\s{2,}(?:(\S+)\s+)?(-?[\d,]*\.?\d+|n/a)\s*$")
STALL = re.compile(r"^smsp__average_warps_issue_stalled_(\w+)_per_issue_active\.ratio$")

COLUMNS = [
    ("us", "Duration"),
    ("SM GHz", "SM Frequency"),
    ("DRAM %", "DRAM Throughput"),
    ("warp instructions", "smsp__inst_executed.sum"),
    ("warps", "smsp__warps_launched.sum"),
    ("registers", "Registers Per Thread"),
    ("occupancy %", "Achieved Occupancy"),
    ("cycles / issue", "Warp Cycles Per Issued Instruction"),
]


def parse(text):
    """The launches of a report, in order: (name, grid, block, {metric: value string})."""
    launches = []
    for line in text.splitlines():
        m = LAUNCH.match(line)
        if m:
            # The name without its parameters, return type or anonymous namespace (which ncu prints
            # as "<unnamed>::", or "unnamed>::" at the start).
            short = m.group(1).split("(", 1)[0].strip()
            short = re.sub(r"^void ", "", short).replace("<unnamed>::", "<")
            short = re.sub(r"^unnamed>::", "", short)
            launches.append((short, m.group(2).replace(" ", ""), m.group(3).replace(" ", ""), {}))
            continue
        if not launches:
            continue
        m = METRIC.match(line)
        if m and m.group(1) not in launches[-1][3]:
            launches[-1][3][m.group(1)] = m.group(3)
    return launches


def stalls(metrics, n):
    """The n largest stall reasons (cycles per issued instruction), largest first."""
    found = []
    for name, value in metrics.items():
        m = STALL.match(name)
        if m and value != "n/a":
            found.append((float(value.replace(",", "")), m.group(1)))
    found.sort(reverse=True)
    return ", ".join(f"{reason} {v:.2f}" for v, reason in found[:n] if v > 0) or "-"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("report")
    ap.add_argument("--stalls", type=int, default=4)
    args = ap.parse_args()
    try:
        with open(args.report, encoding="utf-8", errors="replace") as f:
            launches = parse(f.read())
    except OSError as e:
        sys.exit(f"ncu_summary: cannot read {args.report}: {e.strerror}")
    if not launches:
        sys.exit(f"ncu_summary: no profiled kernel launch in {args.report} (did the regex match a kernel?)")
    head = ["kernel", "grid", "block"] + [c for c, _ in COLUMNS] + ["largest stalls (cycles / issue)"]
    print("| " + " | ".join(head) + " |")
    print("| --- | --- | --- |" + " ---: |" * len(COLUMNS) + " --- |")
    for name, grid, block, metrics in launches:
        cells = [name, grid, block] + [metrics.get(key, "-") for _, key in COLUMNS] + [stalls(metrics, args.stalls)]
        print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
