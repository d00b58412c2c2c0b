#!/usr/bin/env python3
"""scripts/kernel_timeline.py on a trace shaped like bench/kernel_trace.cc's CSV: kernels that start
before their predecessor ends (PDL), whole replays of one graph, names demangled by the library.
Each kernel's "adds" is its end after its predecessor's, so a replay's adds sum to its span."""
import os
import subprocess
import sys
import tempfile
import unittest

SCRIPT = sys.argv.pop(1) if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "../../scripts/kernel_timeline.py")

NAMES = ["void tandem::kernels::(anonymous namespace)::QkNormRopeKernel<float; 128>(float*; int)",
         "void tandem::kernels::detail::(anonymous namespace)::MoeGateUpFp8Kernel<true>(float*; float const*)",
         "_Z3fooi"]
# Per kernel: (starts this long before its predecessor's end, runs this long) in ns.
SHAPE = [(500, 2000), (1000, 5000), (0, 1500)]


# Registers a thread of each kernel in the trace (bench/kernel_trace.cc's registers column).
REGS = [32, 154, 96]


def trace(replays, layers, graph=7, drop_last=False, registers=True):
    header = "start_ns,end_ns,graph_id,graph_node_id,grid,block,shared_bytes" + (",registers" if registers else "")
    lines = [header + ",name"]
    t = 10_000
    for _ in range(replays):
        node = 0
        for _ in range(layers):
            for (early, dur), name, regs in zip(SHAPE, NAMES, REGS):
                start = t - early
                reg = f",{regs}" if registers else ""
                lines.append(f"{start},{start + dur},{graph},{node},132x1x1,128x1x1,0{reg},{name}")
                t = start + dur
                node += 1
        t += 20_000  # between replays
    # an eager kernel outside any graph: ignored
    lines.append(f"{t},{t + 100},0,0,1x1x1,32x1x1,0{',40' if registers else ''},_Z3barv")
    if drop_last:
        lines.pop(-2)
    return "\n".join(lines) + "\n"


def run(text, *args):
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "t.csv")
        with open(path, "w") as f:
            f.write(text)
        return subprocess.run([sys.executable, SCRIPT, path, *args], capture_output=True, text=True)


class KernelTimelineTest(unittest.TestCase):
    def test_adds_sum_to_the_span(self):
        out = run(trace(replays=4, layers=3), "--replays", "2", "--layers-from", "QkNormRope")
        self.assertEqual(out.returncode, 0, out.stderr)
        lines = out.stdout.splitlines()
        # span: first kernel's 2000 ns, then each later one adds its duration less its overlap
        span = 2.0 + (5.0 - 1.0) + 1.5 + 2 * ((2.0 - 0.5) + (5.0 - 1.0) + 1.5)
        self.assertIn(f"9 kernels a replay; replays used 2; span us median {span:.1f}", lines[0])
        i = lines.index("| kernel | start | end | adds | early |")
        rows = {l.split("|")[1].strip(): [c.strip() for c in l.strip("|").split("|")] for l in lines[:i] if l.startswith("| ")}
        gate = rows["MoeGateUpFp8Kernel<true>"]
        self.assertEqual(gate[1:6], ["3", "4.00", "1.00", "12.0", "5.00"])
        qk = rows["QkNormRopeKernel<float; 128>"]
        self.assertEqual(qk[1], "3")
        self.assertEqual(rows["_Z3fooi"][2:4], ["1.50", "0.00"])
        # registers a thread and a block (128 threads)
        self.assertEqual(gate[9:11], ["154", str(154 * 128)])
        self.assertEqual(qk[9:11], ["32", str(32 * 128)])
        self.assertEqual(rows["sum"][4], f"{span:.1f}")
        # the one-layer listing: a layer's kernels in order, from the q/k kernel's start
        self.assertEqual([l.split("|")[1].strip() for l in lines[i + 2:i + 5]],
                         ["QkNormRopeKernel<float; 128>", "MoeGateUpFp8Kernel<true>", "_Z3fooi"])
        self.assertEqual([c.strip() for c in lines[i + 3].strip("|").split("|")][1:], ["1.00", "6.00", "4.00", "1.00"])

    def test_traces_without_registers(self):
        out = run(trace(replays=2, layers=2, registers=False))
        self.assertEqual(out.returncode, 0, out.stderr)
        row = [l for l in out.stdout.splitlines() if l.startswith("| MoeGateUpFp8Kernel<true> |")][0]
        self.assertEqual([c.strip() for c in row.strip("|").split("|")][9:11], ["-", "-"])

    def test_partial_replays_are_refused(self):
        out = run(trace(replays=2, layers=2, drop_last=True))
        self.assertNotEqual(out.returncode, 0)
        self.assertIn("not whole replays", out.stderr)

    def test_no_graph(self):
        out = run("start_ns,end_ns,graph_id,graph_node_id,grid,block,shared_bytes,name\n1,2,0,0,1x1x1,1x1x1,0,_Z1fv\n")
        self.assertNotEqual(out.returncode, 0)
        self.assertIn("no kernel ran inside a graph", out.stderr)


if __name__ == "__main__":
    unittest.main()
