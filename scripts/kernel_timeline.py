#!/usr/bin/env python3
"""What each kernel of a captured decode step adds to the step, from bench/kernel_trace.cc's CSV.

Inside a CUDA graph with programmatic dependent launch a kernel starts before its predecessor ends
(its prologue overlaps), so a kernel's duration says little about the step. What it costs the step
is how much later it ENDS than the kernel before it: "adds" = end(k) - end(k-1). Summed over a
replay these give the replay's span exactly. "early" = end(k-1) - start(k): how long it ran beside
its predecessor (negative: a gap where the GPU held no kernel of the step).

Usage: kernel_timeline.py TRACE.csv [--graph N] [--replays R] [--layers-from NAME]
  Takes the graph with the most kernels a replay (or graph id N), its last R replays (default 5),
  and prints per kernel name: calls a replay, median "adds" and "early" per call (us), the total a
  replay, and the median duration, with each kernel's grid, block, shared memory, registers a thread
  and registers a block (traces written before the registers column show '-'). With --layers-from
  NAME the replay is also cut into layers at each kernel whose short name starts with NAME, and one
  layer's kernels are listed in order.
"""
import argparse
import collections
import csv
import re
import statistics
import sys


def short_name(name):
    name = name.replace('(anonymous namespace)::', '')
    head = (name[5:] if name.startswith('void ') else name).split('(')[0]
    depth, cut = 0, 0
    for i, c in enumerate(head):  # the last '::' outside template brackets
        if c == '<':
            depth += 1
        elif c == '>':
            depth -= 1
        elif c == ':' and depth == 0 and head[i - 1:i + 1] == '::':
            cut = i + 1
    s = head[cut:]
    s = re.sub(r'tandem::kernels::(detail::)?', '', s)
    return s if len(s) <= 60 else s[:57] + '...'


def load(path):
    rows = []
    with open(path, newline='') as f:
        for r in csv.DictReader(f):
            regs = int(r['registers']) if r.get('registers') not in (None, '') else None
            rows.append({'start': int(r['start_ns']), 'end': int(r['end_ns']), 'graph': int(r['graph_id']),
                         'node': int(r['graph_node_id']), 'grid': r['grid'], 'block': r['block'],
                         'shared': int(r['shared_bytes']), 'regs': regs, 'name': short_name(r['name'])})
    return rows


def regs_cells(k):
    """'registers a thread | registers a block' of a record, '- | -' where the trace has none."""
    if k['regs'] is None:
        return '- | -'
    threads = 1
    for d in k['block'].split('x'):
        threads *= int(d)
    return f'{k["regs"]} | {k["regs"] * threads}'


def replays_of(rows, graph):
    ks = sorted((r for r in rows if r['graph'] == graph), key=lambda r: r['start'])
    n = len({r['node'] for r in ks})
    if n == 0 or len(ks) % n != 0:
        sys.exit(f'kernel_timeline: graph {graph}: {len(ks)} records are not whole replays of {n} kernels')
    return [ks[i:i + n] for i in range(0, len(ks), n)], n


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('trace')
    ap.add_argument('--graph', type=int)
    ap.add_argument('--replays', type=int, default=5)
    ap.add_argument('--layers-from')
    a = ap.parse_args()
    rows = load(a.trace)
    nodes = collections.defaultdict(set)  # graph -> its kernel nodes
    for r in rows:
        if r['graph'] != 0:
            nodes[r['graph']].add(r['node'])
    if not nodes:
        sys.exit('kernel_timeline: no kernel ran inside a graph')
    graph = a.graph if a.graph is not None else max(nodes, key=lambda g: (len(nodes[g]), g))
    reps, n = replays_of(rows, graph)
    reps = reps[-a.replays:]
    spans = [(rep[-1]['end'] - rep[0]['start']) / 1e3 for rep in reps]
    print(f'graph {graph}: {n} kernels a replay; replays used {len(reps)}; span us median '
          f'{statistics.median(spans):.1f} (min {min(spans):.1f}, max {max(spans):.1f})')
    per = collections.OrderedDict()
    for rep in reps:
        seen = collections.defaultdict(list)
        for i, k in enumerate(rep):
            prev_end = rep[i - 1]['end'] if i > 0 else k['start']
            seen[k['name']].append(((k['end'] - prev_end) / 1e3, (prev_end - k['start']) / 1e3,
                                    (k['end'] - k['start']) / 1e3, k))
        for name, v in seen.items():
            per.setdefault(name, []).append(v)
    print('| kernel | calls | adds us/call | early us/call | adds us/replay | duration us | grid | block | smem | '
          'regs | regs/block |')
    print('| --- | ---: | ---: | ---: | ---: | ---: | --- | --- | ---: | ---: | ---: |')
    total = 0.0
    for name, reps_v in sorted(per.items(), key=lambda kv: -statistics.median(sum(x[0] for x in v) for v in kv[1])):
        flat = [x for v in reps_v for x in v]
        adds = statistics.median(x[0] for x in flat)
        early = statistics.median(x[1] for x in flat)
        dur = statistics.median(x[2] for x in flat)
        per_rep = statistics.median(sum(x[0] for x in v) for v in reps_v)
        total += per_rep
        k = flat[-1][3]
        print(f'| {name} | {len(reps_v[-1])} | {adds:.2f} | {early:.2f} | {per_rep:.1f} | {dur:.2f} | {k["grid"]} | '
              f'{k["block"]} | {k["shared"]} | {regs_cells(k)} |')
    print(f'| sum | | | | {total:.1f} | | | | | | |')
    if a.layers_from:
        rep = reps[-1]
        cuts = [i for i, k in enumerate(rep) if k['name'].startswith(a.layers_from)]
        if len(cuts) >= 3:
            i0, i1 = cuts[len(cuts) // 2], cuts[len(cuts) // 2 + 1]
            print(f'\none layer (kernels {i0}..{i1 - 1} of the last replay), times from its first kernel\'s start:')
            print('| kernel | start | end | adds | early |')
            print('| --- | ---: | ---: | ---: | ---: |')
            t0 = rep[i0]['start']
            for i in range(i0, i1):
                k = rep[i]
                pe = rep[i - 1]['end']
                print(f'| {k["name"]} | {(k["start"] - t0) / 1e3:.2f} | {(k["end"] - t0) / 1e3:.2f} | '
                      f'{(k["end"] - pe) / 1e3:.2f} | {(pe - k["start"]) / 1e3:.2f} |')


if __name__ == '__main__':
    main()
