#!/usr/bin/env python3
"""scripts/ncu_summary.py on a report shaped like Nsight Compute's text output (lines taken from a
real report of session 35: launch signatures with ncu's "unnamed>::" names, section tables, the
command-line metrics with thousands commas), and scripts/gpu-ncu.sh driving a stand-in ncu."""
import os
import stat
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = sys.argv.pop(1) if len(sys.argv) > 1 else os.path.join(HERE, "../../scripts/ncu_summary.py")
WRAPPER = os.path.join(os.path.dirname(SCRIPT), "gpu-ncu.sh")

REPORT = """==PROF== Connected to process 735 (/tmp/x/mma/quant_nvfp4_cuda_test)
moe_gate_up + moe_down (E 128, K 8, H 2048, I 768) T=1: nvfp4 121.21 us, bf16 122.35 us: 0.99x
[735] quant_nvfp4_cuda_test@127.0.0.1
  void SplitMoeGateUpKernel<unnamed>::Nvfp4Split, 4, 2, 1, 1>(float *, const float *, const int *, Matrix, long, long, long) (192, 8, 1)x(64, 1, 1), Context 1, Stream 7, Device 0, CC 9.0
    Section: Command line profiler metrics
    --------------------------------------------------------------------------- ----------- ------------
    Metric Name                                                                 Metric Unit Metric Value
    --------------------------------------------------------------------------- ----------- ------------
    dram__bytes_read.sum                                                              Mbyte        14.24
    smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio                   inst         0.54
    smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio           inst         4.04
    smsp__average_warps_issue_stalled_membar_per_issue_active.ratio                    inst            0
    smsp__average_warps_issue_stalled_not_selected_per_issue_active.ratio              inst         1.46
    smsp__average_warps_issue_stalled_wait_per_issue_active.ratio                      inst         1.08
    smsp__average_warps_issue_stalled_selected_per_issue_active.ratio                  inst            1
    smsp__inst_executed.sum                                                            inst    4,808,567
    smsp__warps_launched.sum                                                           warp        3,072
    --------------------------------------------------------------------------- ----------- ------------

    Section: GPU Speed Of Light Throughput
    ----------------------- ----------- ------------
    Metric Name             Metric Unit Metric Value
    ----------------------- ----------- ------------
    DRAM Frequency                  Ghz         2.61
    SM Frequency                    Ghz         1.57
    Elapsed Cycles                cycle       22,913
    DRAM Throughput                   %        29.29
    Duration                         us        14.56
    ----------------------- ----------- ------------

    Section: Warp State Statistics
    Warp Cycles Per Issued Instruction             cycle         9.51
    Avg. Active Threads Per Warp                                31.54
    Section: Launch Statistics
    Registers Per Thread             register/thread              80
    Section: Occupancy
    Achieved Occupancy                        %        30.35
  unnamed>::MoeGateUpNvfp4MmaKernel(float *, const float *, const int *, unnamed>::Stack, int, int, long, long) (48, 8, 1)x(256, 1, 1), Context 1, Stream 7, Device 0, CC 9.0
    Section: GPU Speed Of Light Throughput
    Duration                         us        15.87
    DRAM Throughput                   %        26.88
"""


def run(args, **kw):
    return subprocess.run([sys.executable, SCRIPT] + args, capture_output=True, text=True, **kw)


def rows(out):
    return [[c.strip() for c in l.strip().strip("|").split("|")] for l in out.splitlines()[2:]]


class NcuSummaryTest(unittest.TestCase):
    def test_rows(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "ncu.txt")
            with open(path, "w") as f:
                f.write(REPORT)
            out = run([path, "--stalls", "3"], check=True).stdout
        head = [c.strip() for c in out.splitlines()[0].strip("|").split("|")]
        self.assertEqual(head[:4], ["kernel", "grid", "block", "us"])
        r = rows(out)
        self.assertEqual(len(r), 2)
        first = dict(zip(head, r[0]))
        self.assertEqual(first["kernel"], "SplitMoeGateUpKernel<Nvfp4Split, 4, 2, 1, 1>")
        self.assertEqual((first["grid"], first["block"]), ("192,8,1", "64,1,1"))
        self.assertEqual(first["us"], "14.56")
        self.assertEqual(first["SM GHz"], "1.57")  # not the DRAM's 2.61
        self.assertEqual(first["DRAM %"], "29.29")
        self.assertEqual(first["warp instructions"], "4,808,567")
        self.assertEqual(first["warps"], "3,072")
        self.assertEqual(first["registers"], "80")
        self.assertEqual(first["occupancy %"], "30.35")
        self.assertEqual(first["cycles / issue"], "9.51")
        # The three largest stalls, largest first; zero ones never listed.
        self.assertEqual(first["largest stalls (cycles / issue)"],
                         "long_scoreboard 4.04, not_selected 1.46, wait 1.08")
        second = dict(zip(head, r[1]))
        self.assertEqual(second["kernel"], "MoeGateUpNvfp4MmaKernel")
        self.assertEqual((second["us"], second["DRAM %"]), ("15.87", "26.88"))
        self.assertEqual((second["registers"], second["largest stalls (cycles / issue)"]), ("-", "-"))

    def test_no_launch_is_an_error(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "ncu.txt")
            with open(path, "w") as f:
                f.write("==PROF== No kernels were profiled.\n")
            r = run([path])
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("no profiled kernel launch", r.stderr)
        r = run([os.path.join(tempfile.gettempdir(), "no-such-report-ncu.txt")])
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("cannot read", r.stderr)

    def test_wrapper_passes_the_regex_and_prints_the_summary(self):
        with tempfile.TemporaryDirectory() as d:
            fake = os.path.join(d, "ncu")
            with open(fake, "w") as f:
                # The stand-in records its arguments, then prints the report as ncu would.
                f.write(f"#!/bin/sh\nprintf '%s\\n' \"$@\" > {d}/args\ncat <<'EOF'\n{REPORT}EOF\n")
            os.chmod(fake, os.stat(fake).st_mode | stat.S_IEXEC)
            env = dict(os.environ, NCU=fake, NCU_SKIP="5", NCU_COUNT="1")
            out = subprocess.run(["bash", WRAPPER, os.path.join(d, "o"), "GateUp|Down", "/bin/true", "--flag"],
                                 capture_output=True, text=True, env=env, check=True).stdout
            with open(os.path.join(d, "args")) as f:
                args = f.read().splitlines()
            self.assertTrue(os.path.exists(os.path.join(d, "o", "ncu.txt")))
        self.assertEqual(args[args.index("--kernel-name") + 1], "regex:GateUp|Down")
        self.assertEqual(args[args.index("--launch-skip") + 1], "5")
        self.assertEqual(args[args.index("--launch-count") + 1], "1")
        self.assertEqual(args[-2:], ["/bin/true", "--flag"])
        self.assertEqual(len(rows(out)), 2)
        r = subprocess.run(["bash", WRAPPER, "only-two", "args"], capture_output=True, text=True)
        self.assertEqual(r.returncode, 2)
        self.assertIn("Usage", r.stdout)


if __name__ == "__main__":
    unittest.main()
