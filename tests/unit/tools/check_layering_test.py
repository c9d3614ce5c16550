#!/usr/bin/env python3
"""Tests tools/check_layering.py: the repository passes, planted forbidden includes fail.

Usage: check_layering_test.py REPO_ROOT   (CTest passes the source directory)
"""

import os
import shutil
import subprocess
import sys
import tempfile
import unittest

REPO_ROOT = os.path.abspath(sys.argv.pop(1) if len(sys.argv) > 1 else
                            os.path.join(os.path.dirname(__file__), "..", "..", ".."))
SCRIPT = os.path.join(REPO_ROOT, "tools", "check_layering.py")


def run_check(root, *flags):
    result = subprocess.run([sys.executable, SCRIPT, root, *flags],
                            capture_output=True, text=True, check=False)
    return result.returncode, result.stdout + result.stderr


def plant(test, files):
    """A temporary tree holding `files` ({relative path: text}), removed after `test`."""
    root = tempfile.mkdtemp(prefix="check_layering_test_")
    test.addCleanup(shutil.rmtree, root)
    for rel_path, text in files.items():
        path = os.path.join(root, rel_path)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as out:
            out.write(text)
    return root


class CheckLayeringTest(unittest.TestCase):
    def test_repository_has_no_forbidden_include(self):
        code, output = run_check(REPO_ROOT)
        self.assertEqual(code, 0, output)
        self.assertIn("no forbidden includes", output)

    def test_lower_layer_including_higher_layer_fails_with_file_line_and_edge(self):
        root = plant(self, {"runtime/base/planted.h":
                            '// planted\n#include "runtime/net/channel.h"\n'})
        code, output = run_check(root)
        self.assertEqual(code, 1, output)
        self.assertIn('runtime/base/planted.h:2: base (rank 0) -> net (rank 8): '
                      '"runtime/net/channel.h"', output)

    def test_model_including_spec_fails(self):
        root = plant(self, {"runtime/model/transformer.cc": '#include "runtime/spec/verify.h"\n'})
        code, output = run_check(root)
        self.assertEqual(code, 1, output)
        self.assertIn("model (rank 5) -> spec (rank 7)", output)

    def test_service_including_another_service_fails(self):
        root = plant(self, {"draft_worker/main.cc": '#include "target_worker/target_engine.h"\n'})
        code, output = run_check(root)
        self.assertEqual(code, 1, output)
        self.assertIn("draft_worker (rank 11) -> target_worker (rank 12)", output)

    def test_product_code_including_tests_fails(self):
        root = plant(self, {"tools/bench.cc": '#include "tests/testing/tiny_model.h"\n'})
        code, output = run_check(root)
        self.assertEqual(code, 1, output)
        self.assertIn('tools/bench.cc:1: non-test file includes test code: '
                      '"tests/testing/tiny_model.h"', output)

    def test_downward_same_layer_external_and_test_includes_pass(self):
        root = plant(self, {
            "runtime/net/ok.cc": ('#include "runtime/net/channel.h"\n'
                                  '#include "runtime/base/logging.h"\n'
                                  '#include "absl/strings/str_cat.h"\n#include <vector>\n'),
            "tests/unit/net/ok_test.cc": ('#include "tools/cluster/in_process_cluster.h"\n'
                                          '#include "tests/testing/tiny_model.h"\n'),
        })
        code, output = run_check(root)
        self.assertEqual(code, 0, output)

    def test_loops_counts_a_planted_folder_cycle(self):
        root = plant(self, {"a/x.h": '#include "b/y.h"\n', "b/y.h": '#include "a/x.h"\n',
                      "c/z.h": '#include "a/x.h"\n'})
        code, output = run_check(root, "--loops")
        self.assertEqual(code, 0, output)
        self.assertIn("folder cycle: a -> b -> a", output)
        self.assertIn("folder loops: 1 group(s), 1 simple cycle(s)", output)
        self.assertIn("layer loops: 0 group(s), 0 simple cycle(s)", output)

    def test_loops_counts_a_planted_layer_cycle(self):
        root = plant(self, {"runtime/spec/a.h": '#include "runtime/net/b.h"\n',
                            "runtime/net/b.h": '#include "runtime/spec/a.h"\n'})
        code, output = run_check(root, "--loops")
        self.assertEqual(code, 1, output)
        self.assertIn("layer cycle: net -> spec -> net", output)
        self.assertIn("layer loops: 1 group(s), 1 simple cycle(s)", output)


if __name__ == "__main__":
    unittest.main(verbosity=2)
