#!/usr/bin/env python3
"""scripts/ab_summary.py on logs shaped like cuda_decode_bench's: per row and build the median of the
rounds' medians with their min-max, the change against the last build, the graphed decode rows only,
the prefill rows in tokens/s, every weight format apart, rows in numeric order."""
import os
import subprocess
import sys
import tempfile
import unittest

SCRIPT = sys.argv.pop(1) if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "../../scripts/ab_summary.py")


def bench_log(b1_ms, b32_ms, prefill_tok, fp8_ms):
    head = ("| batch | context | graphs | step ms (median, min-max) | tokens/s | distinct experts/layer | KV GB | "
            "state GB (read + written) | GB/step (weights + KV + state) | GB/s | of copy BW |\n"
            "| ---: | ---: | :---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
    row = "| {b} | 1024 | {g} | {ms:.3f} (1.000-9.000) | 100 | 8.0 | 0.1 | 0.000 | 6.19 | 2000 | 47% |\n"
    return ("GPU: NVIDIA H200\n\n## weights: bf16\n\n" + head + row.format(b=32, g="yes", ms=b32_ms) +
            row.format(b=1, g="yes", ms=b1_ms) + row.format(b=1, g="no", ms=99.0) +
            "\n| sequences | tokens per sequence | ms (median, min-max) | tokens/s |\n| ---: | ---: | ---: | ---: |\n"
            f"| 8 | 1024 | 330.0 (329.0-331.0) | {prefill_tok} |\n"
            "\n## weights: fp8\n\n" + head + row.format(b=1, g="yes", ms=fp8_ms))


class AbSummaryTest(unittest.TestCase):
    def test_table(self):
        with tempfile.TemporaryDirectory() as d:
            for r, (a, b) in enumerate([(2.9, 3.0), (2.8, 3.1), (3.0, 2.9)], start=1):
                with open(os.path.join(d, f"ab.new.{r}.log"), "w") as f:
                    f.write(bench_log(a, 20.0 + r, 30000 + r, 2.2))
                with open(os.path.join(d, f"ab.main.{r}.log"), "w") as f:
                    f.write(bench_log(b, 22.0, 24000, 2.3))
            out = subprocess.run([sys.executable, SCRIPT, d, "new", "main"], capture_output=True, text=True,
                                 check=True).stdout
        lines = [l for l in out.splitlines() if l.startswith("| bf16") or l.startswith("| fp8")]
        self.assertEqual([l.split("|")[2].strip() for l in lines],
                         ["decode ms b1 ctx 1024", "decode ms b32 ctx 1024", "prefill tok/s 8 x 1024",
                          "decode ms b1 ctx 1024"])
        b1 = [c.strip() for c in lines[0].strip("|").split("|")]
        # new: rounds 2.9, 2.8, 3.0 -> median 2.9; main: 3.0, 3.1, 2.9 -> 3.0; 2.9 / 3.0 - 1 = -3.3%
        self.assertEqual(b1[2], "2.900 (2.800-3.000, 3) -3.3%")
        self.assertEqual(b1[3], "3.000 (2.900-3.100, 3)")
        self.assertEqual([c.strip() for c in lines[2].strip("|").split("|")][2], "30002 (30001-30003, 3) +25.0%")
        self.assertIn("fp8", lines[3])
        self.assertNotIn("99.000", out)  # the row without graphs is left out

    def test_no_rows(self):
        with tempfile.TemporaryDirectory() as d:
            out = subprocess.run([sys.executable, SCRIPT, d, "a", "b"], capture_output=True, text=True,
                                 check=True).stdout
        self.assertIn("no bench rows", out)


if __name__ == "__main__":
    unittest.main()
