#!/usr/bin/env python3
"""scripts/gpu-peer.sh's `bench` step without a GPU: a fake cuda_decode_bench (a shell script that
prints a bench report, or the format comparison when asked for quantized weights), a fake peer whose
run.sh prints llama.cpp's tables, a fake nvidia-smi. Checks that one call leaves A, the peer, B, the
table and the quantized rows, prints the comparison, skips the rows when told to, and fails with a
message naming the output when the quantized run fails."""
import importlib.util
import os
import stat
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = sys.argv.pop(1) if len(sys.argv) > 1 else os.path.join(HERE, "../../scripts/gpu-peer.sh")
spec = importlib.util.spec_from_file_location("peer_table_test", os.path.join(HERE, "peer_table_test.py"))
fixtures = importlib.util.module_from_spec(spec)
saved_argv = sys.argv[:]
sys.argv = sys.argv[:1]  # the fixtures module reads an optional script path from argv
spec.loader.exec_module(fixtures)
sys.argv = saved_argv

COMPARISON = """
## batch 1 decode by weight format (this run)

| weights | context | tokens/s (median, min-max) | GB/step | vs bf16 (median, min-max) | bytes ratio | target | met |
| --- | ---: | ---: | ---: | ---: | ---: | ---: | :---: |
| bf16 | 1024 | 316 (315-317) | 6.19 | 1.00x (1.00-1.00) | 1.00x | - | - |
| fp8 | 1024 | 442 (441-443) | 3.48 | 1.40x (1.39-1.41) | 1.78x | 1.7x | no |
| nvfp4 | 1024 | 434 (433-435) | 2.29 | 1.37x (1.36-1.38) | 2.70x | 2.5x | no |
"""


def write_exec(path, text):
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR)


class GpuPeerBench(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        d = self.dir.name
        os.makedirs(f"{d}/peer")
        os.makedirs(f"{d}/bin")
        os.makedirs(f"{d}/lib")
        open(f"{d}/lib/libcublas.so.13", "w").close()  # what gpu_add_cublas looks for first
        with open(f"{d}/tandem.txt", "w") as f:
            f.write(fixtures.tandem_output(1.0))
        with open(f"{d}/peer.txt", "w") as f:
            f.write(fixtures.PEER)
        with open(f"{d}/comparison.txt", "w") as f:
            f.write(COMPARISON)
        write_exec(f"{d}/peer/run.sh", f'#!/bin/bash\n[[ $1 == bench ]] && cat "{d}/peer.txt"\n')
        write_exec(f"{d}/bin/nvidia-smi", "#!/bin/bash\necho 'FAKE GPU, 0, 0 MHz, 0 MHz'\n")
        # The quantized run is the one whose arguments name fp8; FAIL_QUANT makes it fail.
        write_exec(f"{d}/bin/cuda_decode_bench",
                   "#!/bin/bash\n"
                   'if [[ "$*" == *fp8* ]]; then\n'
                   '  [[ -n "${FAIL_QUANT:-}" ]] && { echo "out of memory"; exit 3; }\n'
                   f'  cat "{d}/comparison.txt"\n'
                   "else\n"
                   f'  cat "{d}/tandem.txt"\n'
                   "fi\n")

    def tearDown(self):
        self.dir.cleanup()

    def run_bench(self, **env_extra):
        d = self.dir.name
        env = dict(os.environ, PATH=f"{d}/bin:" + os.environ.get("PATH", ""), LD_LIBRARY_PATH=f"{d}/lib")
        env.update(env_extra)
        return subprocess.run(["bash", SCRIPT, "bench", f"{d}/peer", f"{d}/bin/cuda_decode_bench", f"{d}/out"],
                              env=env, capture_output=True, text=True, timeout=120)

    def test_one_call_leaves_both_tables(self):
        r = self.run_bench()
        self.assertEqual(r.returncode, 0, r.stderr)
        out = f"{self.dir.name}/out"
        for name in ("gpu.txt", "tandem-A.txt", "peer.txt", "tandem-B.txt", "table.md", "tandem-quant.txt"):
            self.assertTrue(os.path.exists(f"{out}/{name}"), name)
        with open(f"{out}/table.md") as f:
            self.assertIn("| decode 1 sequence, context 1k |", f.read())
        # The comparison is printed after the peer table, every format's row with it.
        self.assertLess(r.stdout.index("| decode 1 sequence, context 1k |"), r.stdout.index("| weights | context |"))
        for fmt in ("bf16", "fp8", "nvfp4"):
            self.assertIn(f"| {fmt} | 1024 |", r.stdout)

    def test_none_skips_the_quantized_rows(self):
        r = self.run_bench(PEER_QUANT_ARGS="none")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertFalse(os.path.exists(f"{self.dir.name}/out/tandem-quant.txt"))
        self.assertNotIn("| weights | context |", r.stdout)
        self.assertTrue(os.path.exists(f"{self.dir.name}/out/table.md"))

    def test_a_failed_quantized_run_is_an_error_naming_its_output(self):
        r = self.run_bench(FAIL_QUANT="1")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("the quantized rows failed", r.stderr)
        self.assertIn("tandem-quant.txt", r.stderr)
        # The peer table was already written: the failure loses nothing that came before it.
        self.assertTrue(os.path.exists(f"{self.dir.name}/out/table.md"))


if __name__ == "__main__":
    unittest.main()
