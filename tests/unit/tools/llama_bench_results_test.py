#!/usr/bin/env python3
"""Tests tools/llama_bench_results.py: llama-bench records -> results lines.

Usage: llama_bench_results_test.py REPO_ROOT   (CTest passes the source directory)
"""

import json
import os
import subprocess
import sys
import tempfile
import unittest

REPO_ROOT = os.path.abspath(sys.argv.pop(1) if len(sys.argv) > 1 else
                            os.path.join(os.path.dirname(__file__), "..", "..", ".."))
SCRIPT = os.path.join(REPO_ROOT, "tools", "llama_bench_results.py")
sys.path.insert(0, os.path.join(REPO_ROOT, "tools"))
import llama_bench_results  # noqa: E402


def record(n_prompt, n_gen, avg_ts, model="/m/llama-1b.Q4_0.gguf", gpu="NVIDIA H200"):
    return {"model_filename": model, "gpu_info": gpu, "n_prompt": n_prompt, "n_gen": n_gen,
            "avg_ts": avg_ts, "avg_ns": 1}


class ConvertTest(unittest.TestCase):

    def test_decode_prefill_and_the_verify_curve(self):
        records = [record(1, 0, 1000.0), record(2, 0, 1800.0), record(5, 0, 4000.0),
                   record(512, 0, 37515.0), record(0, 128, 946.0)]
        lines = llama_bench_results.convert(records, "", "llama-bench -o json")
        parsed = [json.loads(line) for line in lines]
        by_measure = {p["measure"]: p for p in parsed}
        self.assertEqual(sorted(by_measure),
                         ["decode_b1", "prefill_512", "verify_k2", "verify_k5"])
        self.assertEqual(by_measure["decode_b1"]["value"], 946.0)
        self.assertEqual(by_measure["prefill_512"]["value"], 37515.0)
        # T(2)/T(1) = (2 / 1800) / (1 / 1000)
        self.assertAlmostEqual(by_measure["verify_k2"]["value"], 2000.0 / 1800.0)
        self.assertAlmostEqual(by_measure["verify_k5"]["value"], 1.25)
        for p in parsed:
            self.assertEqual(p["engine"], "llama.cpp")
            self.assertEqual(p["gpu"], "NVIDIA H200")
            self.assertEqual(p["shape"], "llama-1b.Q4_0")
            self.assertEqual(p["command"], "llama-bench -o json")

    def test_the_markdown_table_of_a_log_gives_the_same_records(self):
        table = "\n".join([
            "| model | size | params | backend | ngl | fa | test | t/s |",
            "| ----- | ---: | -----: | ------- | --: | --: | ---: | --: |",
            "| llama 1B Q4_0 | 788 MiB | 1.24 B | CUDA | 99 | 1 | pp512 | 42762.49 ± 10417.65 |",
            "| llama 1B Q4_0 | 788 MiB | 1.24 B | CUDA | 99 | 1 | tg128 | 950.00 ± 10.17 |",
            "build: unknown (0)",
            "| llama 1B Q4_0 | 788 MiB | 1.24 B | CUDA | 99 | 1 | pp1 | 666.95 ± 422.11 |",
            "| llama 1B Q4_0 | 788 MiB | 1.24 B | CUDA | 99 | 1 | pp5 | 2758.67 ± 1370.73 |"])
        records = llama_bench_results.markdown_records(table, "NVIDIA H100", "b.gguf")
        self.assertEqual([(r["n_prompt"], r["n_gen"], r["avg_ts"]) for r in records],
                         [(512, 0, 42762.49), (0, 128, 950.0), (1, 0, 666.95), (5, 0, 2758.67)])
        by_measure = {json.loads(l)["measure"]: json.loads(l)
                      for l in llama_bench_results.convert(records, "", "llama-bench")}
        self.assertEqual(by_measure["decode_b1"]["gpu"], "NVIDIA H100")
        self.assertEqual(by_measure["decode_b1"]["shape"], "b")
        self.assertAlmostEqual(by_measure["verify_k5"]["value"], (5 / 2758.67) * 666.95)

    def test_keys_in_the_writers_order(self):
        line = llama_bench_results.convert([record(0, 128, 946.0)], "8b", "cmd")[0]
        self.assertEqual(line, '{"engine":"llama.cpp","gpu":"NVIDIA H200","shape":"8b",'
                               '"measure":"decode_b1","value":946.0,"command":"cmd"}')

    def test_verify_sizes_need_a_one_token_test(self):
        with self.assertRaisesRegex(llama_bench_results.ConversionError, "1-token"):
            llama_bench_results.convert([record(5, 0, 4000.0)], "", "cmd")

    def test_refuses_mixed_gpus_and_missing_fields(self):
        with self.assertRaisesRegex(llama_bench_results.ConversionError, "gpu_info"):
            llama_bench_results.convert([record(0, 128, 1.0), record(0, 128, 1.0, gpu="B")],
                                        "", "cmd")
        with self.assertRaisesRegex(llama_bench_results.ConversionError, "no field 'avg_ts'"):
            llama_bench_results.convert([{"model_filename": "m", "gpu_info": "g",
                                          "n_prompt": 1, "n_gen": 0}], "", "cmd")

    def test_the_command_line_prints_lines_and_fails_by_name(self):
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump([record(0, 128, 946.0)], f)
        self.addCleanup(os.remove, f.name)
        ok = subprocess.run([sys.executable, SCRIPT, f.name, "--command", "lb"],
                            capture_output=True, text=True, check=False)
        self.assertEqual(ok.returncode, 0, ok.stderr)
        self.assertEqual(json.loads(ok.stdout)["measure"], "decode_b1")
        bad = subprocess.run([sys.executable, SCRIPT, "/nonexistent.json", "--command", "lb"],
                             capture_output=True, text=True, check=False)
        self.assertEqual(bad.returncode, 1)
        self.assertIn("/nonexistent.json", bad.stderr)


if __name__ == "__main__":
    unittest.main()
