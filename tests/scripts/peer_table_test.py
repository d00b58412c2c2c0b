#!/usr/bin/env python3
"""scripts/peer_table.py on outputs shaped like the real tools' (cuda_decode_bench, llama-bench,
llama-batched-bench): the figures land in the right cells, the ratio is the mean of A and B over
llama.cpp's, and a missing case is an error naming it, never a table with a hole."""
import importlib.util
import os
import subprocess
import sys
import tempfile
import unittest

SCRIPT = sys.argv.pop(1) if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "../../scripts/peer_table.py")
spec = importlib.util.spec_from_file_location("peer_table", SCRIPT)
peer_table = importlib.util.module_from_spec(spec)
spec.loader.exec_module(peer_table)


def tandem_output(scale):
    """A cuda_decode_bench report; tokens/s multiplied by `scale` (A and B differ a little)."""
    rows = [(1, 1024, 3.08, 325, 6.19), (8, 1024, 11.47, 697, 26.96), (32, 1024, 28.24, 1133, 56.64),
            (1, 4096, 3.76, 266, 6.49), (8, 4096, 15.09, 530, 29.23), (32, 4096, 31.73, 1008, 66.25)]
    out = ["GPU: NVIDIA H200", "device-to-device copy (read + write), 2 GiB x 10: median 4254 GB/s (min 4250, max 4260)",
           "", "## weights: bf16", "",
           "| batch | context | graphs | step ms (median, min-max) | tokens/s | distinct experts/layer | KV GB | "
           "state GB (read + written) | GB/step (weights + KV + state) | GB/s | of copy BW |",
           "| ---: | ---: | :---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for b, ctx, ms, tok, gb in rows:
        out.append(f"| {b} | {ctx} | yes | {ms:.3f} ({ms:.3f}-{ms:.3f}) | {tok * scale:.0f} | 8.0 | 0.100 | 0.000 | "
                   f"{gb:.2f} | 2000 | 47% |")
    out.append("| 1 | 1024 | no | 3.200 (3.1-3.3) | 999 | 8.0 | 0.1 | 0.000 | 6.19 | 1900 | 45% |")
    out += ["", "| sequences | tokens per sequence | ms (median, min-max) | tokens/s |", "| ---: | ---: | ---: | ---: |",
            f"| 1 | 512 | 34.6 (34.5-34.7) | {14793 * scale:.0f} |", f"| 1 | 2048 | 103.5 (103.4-103.6) | {19792 * scale:.0f} |",
            f"| 8 | 1024 | 330.0 (329.0-331.0) | {24824 * scale:.0f} |"]
    return "\n".join(out) + "\n"


PEER = """== llama.cpp llama-bench: one sequence
| model                          |       size |     params | backend    | ngl | fa | n_ubatch |            test |                  t/s |
| ------------------------------ | ---------: | ---------: | ---------- | --: | -: | -------: | --------------: | -------------------: |
| qwen3moe 30B.A3B BF16          |  56.89 GiB |    30.53 B | CUDA       |  99 |  1 |     2048 |           pp512 |      4743.12 ± 10.21 |
| qwen3moe 30B.A3B BF16          |  56.89 GiB |    30.53 B | CUDA       |  99 |  1 |     2048 |          pp2048 |      4200.50 ± 5.00 |
| qwen3moe 30B.A3B BF16          |  56.89 GiB |    30.53 B | CUDA       |  99 |  1 |     2048 |           tg128 |        190.00 ± 0.41 |
| qwen3moe 30B.A3B BF16          |  56.89 GiB |    30.53 B | CUDA       |  99 |  1 |     2048 |   tg128 @ d1024 |        182.00 ± 0.30 |
| qwen3moe 30B.A3B BF16          |  56.89 GiB |    30.53 B | CUDA       |  99 |  1 |     2048 |   tg128 @ d4096 |        173.00 ± 0.20 |
== llama.cpp llama-batched-bench: 1/8/32 sequences, 1024-token prompts, 128 generated
|    PP |     TG |    B |   N_KV |   T_PP s | S_PP t/s |   T_TG s | S_TG t/s |      T s |    S t/s |
|-------|--------|------|--------|----------|----------|----------|----------|----------|----------|
|  1024 |    128 |    1 |   1152 |    0.231 |  4433.12 |    0.701 |   182.59 |    0.932 |  1236.07 |
|  1024 |    128 |    8 |   9216 |    1.562 |  5243.00 |    1.665 |   615.00 |    3.227 |  2855.88 |
|  1024 |    128 |   32 |  36864 |    6.100 |  5371.00 |    2.994 |  1368.00 |    9.094 |  4053.00 |
"""


def row(table, label):
    for line in table.splitlines():
        if line.startswith(f"| {label} |"):
            return [c.strip() for c in line.strip("|").split("|")]
    raise AssertionError(f"no row {label!r} in\n{table}")


class PeerTableTest(unittest.TestCase):
    def test_cells_and_ratios(self):
        table = peer_table.build_table(tandem_output(1.0), PEER, tandem_output(1.02))
        r = row(table, "decode 32 sequences, context 1k")
        self.assertEqual(r[1:3], ["1,133", "1,156"])
        self.assertEqual(r[4], "1,368")
        # ratio of the mean of A and B: (1133 + 1156) / 2 / 1368 = 0.8366; range 0.828-0.845
        self.assertEqual(r[6], "**0.84x** (0.83-0.85)")
        # shares with tandem's bytes per step: 56.64 GB x (1133 / 32) steps/s / 4254 GB/s = 47%;
        # llama.cpp 56.64 x (1368 / 32) / 4254 = 57%
        self.assertEqual((r[3], r[5]), ("47%", "57%"))
        r = row(table, "decode 1 sequence, context 4k")
        self.assertEqual(r[4], "173")
        r = row(table, "prefill 8 x 1,024 tokens (one step)")
        self.assertEqual((r[1], r[4], r[3]), ("24,824", "5,243", "-"))
        self.assertIn("(4.73-4.83)", r[6])
        r = row(table, "prefill 2,048 tokens")
        self.assertEqual(r[4], "4,200")
        self.assertIn("4254 GB/s", table)

    def test_the_no_graphs_row_is_not_taken(self):
        table = peer_table.build_table(tandem_output(1.0), PEER, tandem_output(1.0))
        self.assertEqual(row(table, "decode 1 sequence, context 1k")[1], "325")

    def test_missing_cases_are_named(self):
        without_b8 = "\n".join(l for l in PEER.splitlines() if not l.startswith("|  1024 |    128 |    8 |"))
        with self.assertRaisesRegex(peer_table.TableError, "B=8 for 'decode 8 sequences"):
            peer_table.build_table(tandem_output(1.0), without_b8, tandem_output(1.0))
        without_d4096 = PEER.replace("tg128 @ d4096", "tg64 @ d4096")
        with self.assertRaisesRegex(peer_table.TableError, "'tg128 @ d4096'"):
            peer_table.build_table(tandem_output(1.0), without_d4096, tandem_output(1.0))
        no_prefill_batch = tandem_output(1.0).replace("| 8 | 1024 | 330.0", "| 4 | 1024 | 330.0")
        with self.assertRaisesRegex(peer_table.TableError, "tandem B has no row for 'prefill 8 x 1,024"):
            peer_table.build_table(tandem_output(1.0), PEER, no_prefill_batch)
        with self.assertRaisesRegex(peer_table.TableError, "A: no 'device-to-device copy"):
            peer_table.build_table("Error: out of memory\n", PEER, tandem_output(1.0))

    def test_command_line(self):
        with tempfile.TemporaryDirectory() as d:
            paths = []
            for name, text in (("a", tandem_output(1.0)), ("p", PEER), ("b", tandem_output(1.0))):
                paths.append(os.path.join(d, name))
                with open(paths[-1], "w") as f:
                    f.write(text)
            ok = subprocess.run([sys.executable, SCRIPT] + paths, capture_output=True, text=True)
            self.assertEqual(ok.returncode, 0, ok.stderr)
            self.assertIn("| decode 8 sequences, context 1k | 697 |", ok.stdout)
            missing = subprocess.run([sys.executable, SCRIPT, paths[0], os.path.join(d, "none"), paths[2]],
                                     capture_output=True, text=True)
            self.assertEqual(missing.returncode, 1)
            self.assertIn("peer_table:", missing.stderr)
            self.assertEqual(subprocess.run([sys.executable, SCRIPT], capture_output=True).returncode, 2)


if __name__ == "__main__":
    unittest.main()
