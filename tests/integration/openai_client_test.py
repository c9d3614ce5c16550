#!/usr/bin/env python3
"""The HTTP front door driven by the official `openai` Python client.

Usage: openai_client_test.py FIXTURE_BINARY
The fixture (http_front_door_fixture) runs a tiny-model cluster with the front
door and prints its port. Exits 77 (skipped, for CTest) when the `openai`
package is not installed.
"""
import json
import subprocess
import sys
import tempfile
import unittest

try:
    import openai
except ImportError:
    print("SKIPPED: the 'openai' Python package is not installed (pip install openai)")
    sys.exit(77)

FIXTURE = None
PORT = None


class OpenAiClientTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.client = openai.OpenAI(base_url=f"http://127.0.0.1:{PORT}/v1", api_key="unused")

    def complete(self, **kwargs):
        return self.client.completions.create(model="tiny", max_tokens=12, temperature=0, **kwargs)

    def chat(self, **kwargs):
        return self.client.chat.completions.create(
            model="tiny", messages=[{"role": "user", "content": "Say hi"}], max_tokens=12, temperature=0, **kwargs)

    def test_models_list_the_served_model(self):
        self.assertEqual([m.id for m in self.client.models.list()], ["tiny"])

    def test_completion_streamed_or_not_gives_the_same_text(self):
        whole = self.complete(prompt="Hello world, hello")
        self.assertEqual(whole.object, "text_completion")
        self.assertIn(whole.choices[0].finish_reason, ("stop", "length"))
        self.assertLessEqual(whole.usage.completion_tokens, 12)
        extra = whole.usage.model_dump()
        for field in ("drafted_tokens", "verified_tokens", "accepted_tokens", "acceptance_rate", "steps"):
            self.assertIn(field, extra)
        streamed = "".join(chunk.choices[0].text for chunk in self.complete(prompt="Hello world, hello", stream=True)
                           if chunk.choices)
        self.assertEqual(streamed, whole.choices[0].text)

    def test_stream_include_usage_ends_with_a_usage_chunk(self):
        chunks = list(self.complete(prompt="Hello", stream=True, stream_options={"include_usage": True}))
        self.assertEqual(chunks[-1].choices, [])
        self.assertGreater(chunks[-1].usage.completion_tokens, 0)

    def test_chat_streamed_or_not_gives_the_same_text(self):
        whole = self.chat()
        self.assertEqual(whole.choices[0].message.role, "assistant")
        streamed = "".join(chunk.choices[0].delta.content or "" for chunk in self.chat(stream=True) if chunk.choices)
        self.assertEqual(streamed, whole.choices[0].message.content)

    def test_n_above_the_limit_is_a_bad_request_naming_n(self):
        with self.assertRaises(openai.BadRequestError) as raised:
            self.complete(prompt="x", n=65)
        self.assertIn("'n' must be in [1, 64]", str(raised.exception))

    def test_an_unknown_field_is_a_bad_request_naming_it(self):
        with self.assertRaises(openai.BadRequestError) as raised:
            self.complete(prompt="x", extra_body={"temprature": 0.5})
        self.assertIn("Unrecognized request argument supplied: temprature", str(raised.exception))

    def test_a_known_but_unsupported_field_is_a_bad_request_naming_it(self):
        with self.assertRaises(openai.BadRequestError) as raised:
            self.chat(extra_body={"guided_json": {"type": "object"}})
        self.assertIn("'guided_json' is not supported", str(raised.exception))
        with self.assertRaises(openai.BadRequestError) as raised:
            self.chat(extra_body={"functions": [{"name": "f", "parameters": {}}]})
        self.assertIn("'functions' is not supported", str(raised.exception))
        # tool_choice "auto" (the default with tools) needs serve's --tool-call-parser.
        with self.assertRaises(openai.BadRequestError) as raised:
            self.chat(tools=[{"type": "function", "function": {"name": "f", "parameters": {}}}])
        self.assertIn("--tool-call-parser", str(raised.exception))

    def test_a_named_tool_choice_returns_a_call_of_it(self):
        # The tiny model's random weights, constrained to a call of f with a small argument.
        tools = [{"type": "function", "function": {"name": "f", "parameters": {
            "type": "object", "properties": {"x": {"enum": [1, 2, 3]}}, "required": ["x"]}}}]
        reply = self.chat(tools=tools, tool_choice={"type": "function", "function": {"name": "f"}},
                          max_completion_tokens=120)
        if reply.choices[0].finish_reason == "length":
            self.skipTest("the random model ran out of tokens inside the call")
        self.assertEqual(reply.choices[0].finish_reason, "tool_calls")
        self.assertIsNone(reply.choices[0].message.content)
        (call,) = reply.choices[0].message.tool_calls
        self.assertTrue(call.id.startswith("call_"))
        self.assertEqual(call.function.name, "f")
        self.assertIn(json.loads(call.function.arguments)["x"], (1, 2, 3))

    def test_structured_outputs_constrain_the_reply(self):
        # The tiny model's random weights, constrained: only the grammar's strings come out.
        for _ in range(3):
            reply = self.chat(extra_body={"structured_outputs": {"choice": ["yes", "no", "maybe"]}})
            self.assertIn(reply.choices[0].message.content, ("yes", "no", "maybe"))
            self.assertEqual(reply.choices[0].finish_reason, "stop")
        regex = {"structured_outputs": {"regex": "[0-9]{3}-[a-c]{2}"}}
        reply = self.complete(prompt="Number:", extra_body=regex)
        self.assertRegex(reply.choices[0].text, r"^[0-9]{3}-[a-c]{2}$")
        self.assertEqual(reply.choices[0].finish_reason, "stop")
        chunks = list(self.complete(prompt="Number:", extra_body=regex, stream=True))
        self.assertEqual("".join(c.choices[0].text for c in chunks if c.choices), reply.choices[0].text)
        self.assertEqual([c.choices[0].finish_reason for c in chunks if c.choices][-1], "stop")
        reply = self.chat(response_format={"type": "json_schema", "json_schema": {
            "name": "flag", "strict": True, "schema": {"type": "object", "properties": {"ok": {"type": "boolean"}},
                                                       "required": ["ok"]}}})
        if reply.choices[0].finish_reason == "stop":
            self.assertIn(json.loads(reply.choices[0].message.content)["ok"], (True, False))

    def test_a_bad_schema_is_a_bad_request_naming_it(self):
        with self.assertRaises(openai.BadRequestError) as raised:
            self.chat(response_format={"type": "json_schema", "json_schema": {
                "name": "bad", "schema": {"type": "no-such-type"}}})
        self.assertIn("json_schema", str(raised.exception))

    def test_another_model_is_not_found(self):
        with self.assertRaises(openai.NotFoundError) as raised:
            self.client.completions.create(model="gpt-4", prompt="x", max_tokens=1)
        self.assertEqual(raised.exception.code, "model_not_found")

    def test_logit_bias_forces_its_token(self):
        # The text of token 67 from an echo: its prompt [67] and the one token the bias forces.
        echoed = self.client.completions.create(model="tiny", prompt=[67], echo=True, max_tokens=1,
                                                temperature=0, logit_bias={"67": 100})
        text = echoed.choices[0].text
        self.assertEqual(len(text) % 2, 0)
        piece = text[:len(text) // 2]
        for stream in (False, True):
            forced = self.client.completions.create(model="tiny", prompt="Hello", max_tokens=4, temperature=1,
                                                    seed=3, logit_bias={"67": 100}, stream=stream)
            got = "".join(c.choices[0].text for c in forced if c.choices) if stream else forced.choices[0].text
            self.assertEqual(got, piece * 4)

    def test_penalties_are_accepted_and_checked(self):
        reply = self.complete(prompt="Hello world, hello", presence_penalty=0.5, frequency_penalty=1.0,
                              extra_body={"repetition_penalty": 1.3})
        self.assertGreater(reply.usage.completion_tokens, 0)
        with self.assertRaises(openai.BadRequestError) as raised:
            self.complete(prompt="x", presence_penalty=3)
        self.assertIn("'presence_penalty' must be in [-2, 2]", str(raised.exception))


def main():
    global FIXTURE, PORT
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    with tempfile.TemporaryDirectory() as model_dir:
        fixture = subprocess.Popen([sys.argv[1], model_dir], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        try:
            line = fixture.stdout.readline().split()
            if len(line) != 2 or line[0] != "port":
                print("the fixture did not start")
                return 1
            PORT = int(line[1])
            result = unittest.main(argv=[sys.argv[0]], exit=False).result
            return 0 if result.wasSuccessful() else 1
        finally:
            fixture.stdin.close()
            fixture.wait(timeout=60)


if __name__ == "__main__":
    sys.exit(main())
