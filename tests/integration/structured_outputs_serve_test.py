#!/usr/bin/env python3
"""Structured outputs through `splitspec serve` on the default model, speculation on.

Usage: structured_outputs_serve_test.py SPLITSPEC_BINARY MODEL_GGUF

Starts `serve` twice on MODEL_GGUF: with its default draft pool (lookup, drafting
inside the target: speculation on) and with `--drafter none` (plain decoding).
Through the official `openai` client, requests with varied JSON schemas
(response_format json_schema, strict or not; vLLM's structured_outputs json) must
all return JSON that parses and validates against its schema (the `jsonschema`
package, independent of xgrammar), json_object replies must parse as objects, and
greedy replies with speculation must equal those without, token for token. A bad
schema is a 400 naming it. Exits 77 (skipped, for CTest) when `openai` or
`jsonschema` is missing or the model file is absent.
$STRUCTURED_OUTPUTS_REQUESTS sets how many schema requests run (default 100).
"""
import concurrent.futures
import json
import os
import sys
import unittest

try:
    import jsonschema
    import openai
except ImportError as missing:
    print(f"SKIPPED: {missing.name} is not installed (deploy/install_test_deps.sh)")
    sys.exit(77)

from serve_process import ServeProcess  # noqa: E402 (needs openai, checked above)

BINARY = None
MODEL = None
NAME = "model"

PEOPLE = [("Alice", 31, "Paris"), ("Bob", 45, "Lyon"), ("Chen", 27, "Shanghai"), ("Dana", 52, "Austin"),
          ("Eve", 19, "Berlin"), ("Farid", 38, "Cairo"), ("Gita", 61, "Pune"), ("Hugo", 24, "Porto")]

SCHEMAS = [
    {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
     "required": ["name", "age"]},
    {"type": "object", "properties": {"city": {"type": "string"}, "adult": {"type": "boolean"}},
     "required": ["city", "adult"]},
    {"type": "object", "properties": {"name": {"type": "string", "maxLength": 20},
                                      "tags": {"type": "array", "items": {"type": "string", "maxLength": 12},
                                               "maxItems": 3}},
     "required": ["name", "tags"]},
    {"type": "object", "properties": {"person": {"type": "object", "properties": {
        "name": {"type": "string"}, "age": {"type": "integer", "minimum": 0, "maximum": 150}},
        "required": ["name", "age"]}}, "required": ["person"]},
    {"type": "object", "properties": {"answer": {"enum": ["yes", "no"]}, "confidence": {"type": "number"}},
     "required": ["answer", "confidence"]},
    {"type": "array", "items": {"type": "string", "maxLength": 16}, "minItems": 1, "maxItems": 3},
]


def Serve(flags):
    """`splitspec serve` on MODEL with `flags`, until stop() (serve_process.py)."""
    return ServeProcess(BINARY, MODEL, NAME, flags, "splitspec-structured-")


def schema_request(i):
    """Request i: a schema, a prompt whose facts the reply copies, how it is sent."""
    schema = SCHEMAS[i % len(SCHEMAS)]
    name, age, city = PEOPLE[i % len(PEOPLE)]
    prompt = (f"{name} is {age} years old and lives in {city}. "
              f"Reply with JSON matching this schema: {json.dumps(schema)}")
    strict = i % 2 == 0
    if i % 3 == 2:
        extra = {"extra_body": {"structured_outputs": {"json": schema}}}
    else:
        extra = {"response_format": {"type": "json_schema",
                                     "json_schema": {"name": f"s{i}", "schema": schema, "strict": strict}}}
    return schema, prompt, extra


def chat(serve, prompt, **kwargs):
    reply = serve.client.chat.completions.create(
        model=NAME, messages=[{"role": "user", "content": prompt}], max_tokens=160, temperature=0, seed=1,
        **kwargs)
    choice = reply.choices[0]
    choice.accepted_tokens = reply.usage.model_dump().get("accepted_tokens", 0)
    return choice


class StructuredOutputsServeTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.requests = int(os.environ.get("STRUCTURED_OUTPUTS_REQUESTS", "100"))
        cls.replies = {}
        for label, flags in (("speculative", []), ("plain", ["--drafter", "none"])):
            serve = Serve(flags)
            try:
                with concurrent.futures.ThreadPoolExecutor(4) as pool:
                    jobs = [pool.submit(chat, serve, *schema_request(i)[1:2], **schema_request(i)[2])
                            for i in range(cls.requests)]
                    objects = [pool.submit(chat, serve, f"Describe {p[0]} as a JSON object.",
                                           response_format={"type": "json_object"}) for p in PEOPLE[:4]]
                    cls.replies[label] = ([j.result() for j in jobs], [j.result() for j in objects])
                if label == "speculative":
                    cls.bad_schema = None
                    try:
                        chat(serve, "x", response_format={"type": "json_schema", "json_schema": {
                            "name": "bad", "schema": {"type": "no-such-type"}}})
                    except openai.BadRequestError as error:
                        cls.bad_schema = str(error)
            finally:
                serve.stop()

    def test_every_schema_reply_parses_and_validates(self):
        for label, (replies, _) in self.replies.items():
            for i, choice in enumerate(replies):
                schema = schema_request(i)[0]
                self.assertEqual(choice.finish_reason, "stop", f"{label} {i}: {choice.message.content!r}")
                value = json.loads(choice.message.content)
                jsonschema.validate(value, schema)

    def test_json_object_replies_are_objects(self):
        for label, (_, objects) in self.replies.items():
            for choice in objects:
                if choice.finish_reason == "stop":
                    self.assertIsInstance(json.loads(choice.message.content), dict, label)
                else:  # cut by max_tokens: still a prefix of an object
                    self.assertTrue(choice.message.content.lstrip().startswith("{"), label)

    def test_greedy_with_speculation_equals_greedy_without(self):
        speculative, plain = self.replies["speculative"], self.replies["plain"]
        for a, b in zip(speculative[0] + speculative[1], plain[0] + plain[1]):
            self.assertEqual(a.message.content, b.message.content)
            self.assertEqual(a.finish_reason, b.finish_reason)

    def test_drafts_were_accepted_under_the_grammar(self):
        replies, objects = self.replies["speculative"]
        self.assertGreater(sum(c.accepted_tokens for c in replies + objects), 0,
                           "speculation never had a drafted token accepted")
        replies, objects = self.replies["plain"]
        self.assertEqual(sum(c.accepted_tokens for c in replies + objects), 0)

    def test_a_bad_schema_is_a_bad_request_naming_it(self):
        self.assertIsNotNone(self.bad_schema, "the bad schema was accepted")
        self.assertIn("json_schema", self.bad_schema)


if __name__ == "__main__":
    BINARY, MODEL = sys.argv[1], os.path.abspath(sys.argv[2])
    if not os.path.exists(MODEL):
        print(f"SKIPPED: no model at {MODEL}")
        sys.exit(77)
    sys.argv = sys.argv[:1]
    unittest.main()
