#!/usr/bin/env python3
"""Log probabilities and n > 1 through the HTTP front door, driven by the official
`openai` Python client (streaming included).

Usage: openai_logprobs_test.py FIXTURE_BINARY
The fixture (http_front_door_fixture) runs a tiny-model cluster (an n-gram drafter:
speculation on) with the front door and prints its port. Exits 77 (skipped, for
CTest) when the `openai` package is not installed.
"""
import subprocess
import sys
import tempfile
import unittest

try:
    import openai
except ImportError:
    print("SKIPPED: the 'openai' Python package is not installed (pip install openai)")
    sys.exit(77)

PORT = None
PROMPT = "Hello world, hello world, hello"


def chat_entries(logprobs):
    return [(e.token, e.logprob, tuple(e.bytes), tuple((t.token, t.logprob) for t in e.top_logprobs))
            for e in logprobs.content]


class OpenAiLogprobsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.client = openai.OpenAI(base_url=f"http://127.0.0.1:{PORT}/v1", api_key="unused")

    def chat(self, **kwargs):
        return self.client.chat.completions.create(
            model="tiny", messages=[{"role": "user", "content": "Say hi"}], max_tokens=12, **kwargs)

    def complete(self, **kwargs):
        return self.client.completions.create(model="tiny", prompt=PROMPT, max_tokens=12, **kwargs)

    def test_chat_logprobs_have_openai_shape_and_streaming_matches(self):
        whole = self.chat(temperature=0, logprobs=True, top_logprobs=3)
        choice = whole.choices[0]
        content = choice.logprobs.content
        self.assertEqual(len(content), whole.usage.completion_tokens)
        for entry in content:
            self.assertLessEqual(entry.logprob, 0.0)
            self.assertEqual(len(entry.top_logprobs), 3)
            tops = [t.logprob for t in entry.top_logprobs]
            self.assertEqual(tops, sorted(tops, reverse=True))
            # Greedy: the chosen token is the likeliest.
            self.assertEqual(entry.token, entry.top_logprobs[0].token)
            self.assertEqual(entry.logprob, entry.top_logprobs[0].logprob)
            try:
                self.assertEqual(bytes(entry.bytes).decode("utf-8"), entry.token)
            except UnicodeDecodeError:
                pass  # a token ending inside a character: its text has U+FFFD, its bytes are exact
        text = b"".join(bytes(e.bytes) for e in content).decode("utf-8", "replace")
        self.assertIn(choice.message.content.strip(), text)
        streamed = []
        for chunk in self.chat(temperature=0, logprobs=True, top_logprobs=3, stream=True):
            if chunk.choices and chunk.choices[0].logprobs is not None:
                streamed.extend(chat_entries(chunk.choices[0].logprobs))
        self.assertEqual(streamed, chat_entries(choice.logprobs))

    def test_greedy_logprobs_with_speculation_equal_plain_decoding(self):
        speculative = self.chat(temperature=0, logprobs=True, top_logprobs=5)
        plain = self.chat(temperature=0, logprobs=True, top_logprobs=5, extra_body={"drafter": "none"})
        self.assertEqual(speculative.choices[0].message.content, plain.choices[0].message.content)
        self.assertEqual(chat_entries(speculative.choices[0].logprobs), chat_entries(plain.choices[0].logprobs))

    def test_no_logprobs_asked_none_returned(self):
        self.assertIsNone(self.chat(temperature=0).choices[0].logprobs)
        self.assertIsNone(self.complete(temperature=0).choices[0].logprobs)

    def test_completion_logprobs_have_the_legacy_shape_and_streaming_matches(self):
        whole = self.complete(temperature=0, logprobs=2)
        lp = whole.choices[0].logprobs
        n = whole.usage.completion_tokens
        self.assertEqual(len(lp.tokens), n)
        self.assertEqual(len(lp.token_logprobs), n)
        self.assertEqual(len(lp.top_logprobs), n)
        self.assertEqual(len(lp.text_offset), n)
        self.assertEqual(lp.text_offset[0], 0)
        self.assertEqual(lp.text_offset, sorted(lp.text_offset))
        for token, logprob, top in zip(lp.tokens, lp.token_logprobs, lp.top_logprobs):
            self.assertLessEqual(len(top), 2)
            self.assertEqual(max(top.values()), logprob)  # greedy: the chosen token is the likeliest
            self.assertIn(token, top)
        tokens, logprobs = [], []
        for chunk in self.complete(temperature=0, logprobs=2, stream=True):
            if chunk.choices and chunk.choices[0].logprobs is not None:
                tokens += chunk.choices[0].logprobs.tokens
                logprobs += chunk.choices[0].logprobs.token_logprobs
        self.assertEqual(tokens, lp.tokens)
        self.assertEqual(logprobs, lp.token_logprobs)
        with self.assertRaises(openai.BadRequestError) as raised:
            self.complete(temperature=0, logprobs=0, echo=True)  # would need the prompt's logprobs
        self.assertIn('with "echo": true would need', str(raised.exception))

    def test_logprobs_limits_are_bad_requests_naming_the_field(self):
        with self.assertRaises(openai.BadRequestError) as raised:
            self.chat(logprobs=True, top_logprobs=21)
        self.assertIn("'top_logprobs' must be in [0, 20]", str(raised.exception))
        with self.assertRaises(openai.BadRequestError) as raised:
            self.chat(top_logprobs=2)
        self.assertIn('needs "logprobs": true', str(raised.exception))
        with self.assertRaises(openai.BadRequestError) as raised:
            self.complete(logprobs=21)
        self.assertIn("'logprobs' must be in [0, 20]", str(raised.exception))

    def test_n_seeded_choices_each_equal_the_single_request_with_the_derived_seed(self):
        # Plain decoding (drafter none): a seeded sampled request reproduces exactly.
        body = {"drafter": "none"}
        many = self.complete(n=3, seed=11, temperature=1.0, extra_body=body)
        self.assertEqual([c.index for c in many.choices], [0, 1, 2])
        singles = [self.complete(seed=11 + i, temperature=1.0, extra_body=body) for i in range(3)]
        self.assertEqual([c.text for c in many.choices], [s.choices[0].text for s in singles])
        self.assertEqual(many.usage.completion_tokens, sum(s.usage.completion_tokens for s in singles))
        self.assertEqual(many.usage.prompt_tokens, singles[0].usage.prompt_tokens)
        self.assertGreater(len(set(c.text for c in many.choices)), 1, "sampled choices should differ")
        texts = {}
        finish = {}
        for chunk in self.complete(n=3, seed=11, temperature=1.0, extra_body=body, stream=True):
            for c in chunk.choices:
                texts[c.index] = texts.get(c.index, "") + c.text
                if c.finish_reason:
                    finish[c.index] = c.finish_reason
        self.assertEqual([texts[i] for i in range(3)], [c.text for c in many.choices])
        self.assertEqual([finish[i] for i in range(3)], [c.finish_reason for c in many.choices])

    def test_n_greedy_chat_choices_are_equal_and_carry_their_logprobs(self):
        reply = self.chat(n=3, temperature=0, logprobs=True)
        self.assertEqual([c.index for c in reply.choices], [0, 1, 2])
        contents = [c.message.content for c in reply.choices]
        self.assertEqual(contents, [contents[0]] * 3)
        self.assertEqual(chat_entries(reply.choices[1].logprobs), chat_entries(reply.choices[0].logprobs))
        streamed = {}
        for chunk in self.chat(n=3, temperature=0, stream=True):
            for c in chunk.choices:
                streamed[c.index] = streamed.get(c.index, "") + (c.delta.content or "")
        self.assertEqual([streamed[i] for i in range(3)], contents)


def main():
    global PORT
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
