#!/usr/bin/env python3
"""The structured-output flags of `splitspec generate` on the default model.

Usage: cli_structured_outputs_test.py SPLITSPEC_BINARY MODEL_GGUF

--json-schema FILE, --regex RE, --grammar FILE and --choice A,B,... each constrain the output
(checked independently: `jsonschema`, Python's `re`), with speculation (the ngram drafter)
equal to plain greedy decoding token for token; two of them at once, or an unreadable file,
fail naming the flags. Exits 77 (skipped, for CTest) when `jsonschema` or the model is missing.
"""
import json
import os
import re
import subprocess
import sys
import tempfile
import unittest

try:
    import jsonschema
except ImportError:
    print("SKIPPED: jsonschema is not installed (deploy/setup.sh)")
    sys.exit(77)

BINARY = None
MODEL = None
PROMPT = ("<|im_start|>user\nAda Byron is 36 and lives in London. Give her name, age and city as JSON."
          "<|im_end|>\n<|im_start|>assistant\n")
SCHEMA = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 20},
                                           "age": {"type": "integer"},
                                           "city": {"type": "string", "maxLength": 20}},
          "required": ["name", "age", "city"]}


def generate(*flags, drafter="none"):
    """generate's --json line for PROMPT with `flags`; (returncode, parsed line or stderr)."""
    run = subprocess.run([BINARY, "generate", "--target", MODEL, "--drafter", drafter, "--prompt", PROMPT,
                          "--max-tokens", "64", "--threads", "1", "--json", *flags],
                         capture_output=True, text=True, timeout=300)
    if run.returncode != 0:
        return run.returncode, run.stderr
    return 0, json.loads(run.stdout.strip().splitlines()[-1])


class CliStructuredOutputsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="splitspec-cli-structured-")
        cls.schema_path = os.path.join(cls.dir, "schema.json")
        with open(cls.schema_path, "w") as f:
            json.dump(SCHEMA, f)
        cls.grammar_path = os.path.join(cls.dir, "answer.ebnf")
        with open(cls.grammar_path, "w") as f:
            f.write('root ::= "Name: " [A-Z] [a-z]+ ", age " [0-9]+\n')

    def check_both(self, *flags):
        """The output with speculation equals the plain one; returns its text."""
        code, plain = generate(*flags)
        self.assertEqual(code, 0, plain)
        code, speculative = generate(*flags, drafter="ngram")
        self.assertEqual(code, 0, speculative)
        self.assertEqual(speculative["token_ids"], plain["token_ids"])
        return plain["text"]

    def test_json_schema(self):
        jsonschema.validate(json.loads(self.check_both("--json-schema", self.schema_path)), SCHEMA)

    def test_regex(self):
        self.assertRegex(self.check_both("--regex", "[A-Z][a-z]+ is [0-9]{1,3}"), r"^[A-Z][a-z]+ is [0-9]{1,3}$")

    def test_grammar(self):
        self.assertRegex(self.check_both("--grammar", self.grammar_path), r"^Name: [A-Z][a-z]+, age [0-9]+$")

    def test_choice(self):
        self.assertIn(self.check_both("--choice", "London,Paris,Rome"), ("London", "Paris", "Rome"))

    def test_bad_flags_are_refused_naming_them(self):
        code, error = generate("--regex", "a", "--choice", "a,b")
        self.assertNotEqual(code, 0)
        self.assertIn("give at most one of --json-schema, --regex, --grammar, --choice", error)
        code, error = generate("--json-schema", os.path.join(self.dir, "missing.json"))
        self.assertNotEqual(code, 0)
        self.assertIn("--json-schema: cannot open", error)


if __name__ == "__main__":
    BINARY, MODEL = sys.argv[1], os.path.abspath(sys.argv[2])
    if not os.path.exists(MODEL):
        print(f"SKIPPED: no model at {MODEL}")
        sys.exit(77)
    sys.argv = sys.argv[:1]
    unittest.main()
