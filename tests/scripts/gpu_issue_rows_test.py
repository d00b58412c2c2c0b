#!/usr/bin/env python3
"""scripts/gpu-issue-rows.sh without a GPU: a fake cuda_decode_bench (a shell script that logs its
arguments and prints a bench report, or the format comparison when asked for quantized weights).
Checks the two runs' arguments (the quantized batches default to 1,8,32 and follow the third
argument), that both outputs are kept and their tables printed, and that a failing run's status is
reported."""
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = sys.argv.pop(1) if len(sys.argv) > 1 else os.path.join(HERE, "../../scripts/gpu-issue-rows.sh")

FAKE = """#!/bin/bash
echo "$*" >> "{log}"
echo "device-to-device copy (read + write), 2 GiB x 10: median 4231 GB/s"
echo "| batch | context | graphs | step ms |"
echo "| 1 | 1024 | yes | 2.500 (2.49-2.51) |"
if [[ "$*" == *nvfp4* ]]; then
  printf '| weights | context | vs bf16 |\\n| --- | ---: | ---: |\\n| fp8 | 1024 | 1.40x |\\n\\nafter the table\\n'
  exit {quant_rc}
fi
"""


class GpuIssueRowsTest(unittest.TestCase):
    def run_rows(self, quant_rc=0, extra=()):
        d = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, d)
        log = os.path.join(d, "args.log")
        bench = os.path.join(d, "bench")
        with open(bench, "w") as f:
            f.write(FAKE.format(log=log, quant_rc=quant_rc))
        os.chmod(bench, os.stat(bench).st_mode | stat.S_IXUSR)
        out = os.path.join(d, "out")
        r = subprocess.run(["bash", SCRIPT, bench, out, *extra], capture_output=True, text=True, timeout=60)
        with open(log) as f:
            calls = f.read().splitlines()
        return r, calls, out

    def test_both_runs_and_their_tables(self):
        r, calls, out = self.run_rows()
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(len(calls), 2)
        self.assertIn("--batches 1,8,32 --contexts 1024,4096 --prefill 512,2048 --prefill-batch 8x1024", calls[0])
        self.assertIn("--weights bf16,fp8,nvfp4 --batches 1,8,32 --contexts 1024,4096 --prefill= --prefill-batch=",
                      calls[1])
        self.assertTrue(os.path.exists(os.path.join(out, "tandem-bf16.txt")))
        self.assertTrue(os.path.exists(os.path.join(out, "tandem-quant.txt")))
        self.assertIn("median 4231 GB/s", r.stdout)
        self.assertIn("| fp8 | 1024 | 1.40x |", r.stdout)
        self.assertNotIn("after the table", r.stdout)
        self.assertIn("bf16 rc=0", r.stdout)
        self.assertIn("quant rc=0", r.stdout)

    def test_quantized_batches_follow_the_argument(self):
        r, calls, _ = self.run_rows(extra=("1",))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("--weights bf16,fp8,nvfp4 --batches 1 --contexts", calls[1])

    def test_a_failing_run_is_reported(self):
        r, _, _ = self.run_rows(quant_rc=3)
        self.assertIn("quant rc=3", r.stdout)

    def test_usage(self):
        r = subprocess.run(["bash", SCRIPT], capture_output=True, text=True, timeout=30)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("usage", r.stderr)


if __name__ == "__main__":
    unittest.main()
