#!/usr/bin/env python3
"""Tool calling through `splitspec serve` on the default model, speculation on and off.

Usage: tool_calls_serve_test.py SPLITSPEC_BINARY MODEL_GGUF

Starts `serve` twice on MODEL_GGUF: with its default draft pool (lookup drafting inside the
target: speculation on) and `--tool-call-parser hermes`, and with `--drafter none` (plain
decoding) and no parser. Through the official `openai` client:
  - a named function (tool_choice {"type": "function", ...}) gives one call of it whose
    arguments validate against the tool's schema (`jsonschema`, independent of xgrammar), with
    finish_reason "tool_calls"; "required" gives calls of the tools; greedy speculative
    replies equal plain ones, calls included;
  - tool_choice "auto" with the hermes parser reads a call the model writes (here made certain
    by a regex constraint on the reply), and is a 400 naming --tool-call-parser without one;
  - streamed replies (tool-call arguments in pieces) assembled from their deltas (content,
    tool_calls by index) equal the non-streamed replies; one cut by max_tokens inside its calls
    has the same content, and keeps the pieces of the calls it had sent;
  - a history with an assistant's tool_calls and a tool message is accepted and reaches the
    prompt;
and, over raw HTTP, the reply's JSON has OpenAI's shape (content null, "call_" ids).
Exits 77 (skipped, for CTest) when `openai` or `jsonschema` is missing or the model is absent.
"""
import http.client
import json
import os
import sys
import unittest

try:
    import jsonschema
    import openai
except ImportError as missing:
    print(f"SKIPPED: {missing.name} is not installed (deploy/setup.sh)")
    sys.exit(77)

from serve_process import ServeProcess  # noqa: E402 (needs openai, checked above)

BINARY = None
MODEL = None
NAME = "model"

WEATHER = {"type": "object",
           "properties": {"city": {"type": "string", "maxLength": 16},
                          "unit": {"enum": ["celsius", "fahrenheit"]}},
           "required": ["city", "unit"]}
ADD = {"type": "object",
       "properties": {"a": {"type": "integer", "minimum": 0, "maximum": 1000},
                      "b": {"type": "integer", "minimum": 0, "maximum": 1000}},
       "required": ["a", "b"]}
TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Current weather in a city",
                                           "parameters": WEATHER}},
         {"type": "function", "function": {"name": "add", "description": "Add two integers",
                                           "parameters": ADD}}]
SCHEMAS = {"get_weather": WEATHER, "add": ADD}
PROMPTS = ["What is the weather in Paris, in celsius?", "Add 12 and 30.",
           "Is it cold in Oslo? Use fahrenheit.", "What is 7 plus 5?"]
# A hermes call the model must write under tool_choice "auto" (a regex on the reply).
HERMES_CALL = (r'<tool_call>\n\{"name": "get_weather", "arguments": \{"city": "[A-Z][a-z]{1,10}", '
               r'"unit": "(celsius|fahrenheit)"\}\}\n</tool_call>')


def Serve(flags):
    """`splitspec serve` on MODEL with `flags`, until stop() (serve_process.py)."""
    return ServeProcess(BINARY, MODEL, NAME, flags, "splitspec-tools-")


def reply_of(choice):
    """A choice (whole) as plain data: content, calls, finish_reason."""
    calls = [(c.id, c.type, c.function.name, c.function.arguments) for c in (choice.message.tool_calls or [])]
    return {"content": choice.message.content, "tool_calls": calls, "finish_reason": choice.finish_reason}


def chat(serve, messages, **kwargs):
    reply = serve.client.chat.completions.create(model=NAME, messages=messages, max_tokens=96,
                                                 temperature=0, seed=1, **kwargs)
    result = reply_of(reply.choices[0])
    result["accepted_tokens"] = reply.usage.model_dump().get("accepted_tokens", 0)
    result["prompt_tokens"] = reply.usage.prompt_tokens
    return result


def chat_streamed(serve, messages, **kwargs):
    """The streamed reply assembled from its deltas, as reply_of gives the whole one."""
    content, calls, finish, roles = None, {}, None, []
    stream = serve.client.chat.completions.create(model=NAME, messages=messages, max_tokens=96,
                                                  temperature=0, seed=1, stream=True, **kwargs)
    for chunk in stream:
        for choice in chunk.choices:
            delta = choice.delta
            if delta.role:
                roles.append(delta.role)
            if delta.content:
                content = (content or "") + delta.content
            for call in delta.tool_calls or []:
                if call.index not in calls:
                    # A call's first delta names it, with arguments "" (the pieces follow).
                    assert call.id and call.function.name, call
                    assert call.function.arguments == "", call
                entry = calls.setdefault(call.index, {"id": None, "type": None, "name": "", "arguments": "",
                                                      "pieces": 0})
                entry["pieces"] += 1 if call.function is not None and call.function.arguments else 0
                entry["id"] = call.id or entry["id"]
                entry["type"] = call.type or entry["type"]
                if call.function is not None:
                    entry["name"] += call.function.name or ""
                    entry["arguments"] += call.function.arguments or ""
            if choice.finish_reason:
                finish = choice.finish_reason
    assert roles == ["assistant"], roles
    ordered = [calls[i] for i in sorted(calls)]
    assert sorted(calls) == list(range(len(calls))), sorted(calls)
    return {"content": content if content or not ordered else None,
            "tool_calls": [(c["id"], c["type"], c["name"], c["arguments"]) for c in ordered],
            "argument_pieces": [c["pieces"] for c in ordered],
            "finish_reason": finish}


def user(prompt):
    return [{"role": "user", "content": prompt}]


def named(function):
    return {"type": "function", "function": {"name": function}}


class ToolCallsServeTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.replies = {}
        for label, flags in (("speculative", ["--tool-call-parser", "hermes"]), ("plain", ["--drafter", "none"])):
            serve = Serve(flags)
            try:
                replies = {"named": [], "required": [], "streamed": []}
                for i, prompt in enumerate(PROMPTS):
                    function = "get_weather" if i % 2 == 0 else "add"
                    replies["named"].append(chat(serve, user(prompt), tools=TOOLS, tool_choice=named(function)))
                    replies["required"].append(chat(serve, user(prompt), tools=TOOLS, tool_choice="required",
                                                    parallel_tool_calls=False))
                # Parallel calls allowed: this small model repeats its call until max_tokens.
                replies["required_parallel"] = chat(serve, user(PROMPTS[1]), tools=TOOLS, tool_choice="required")
                replies["streamed"] = [
                    (chat(serve, user(PROMPTS[0]), tools=TOOLS, tool_choice=named("get_weather")),
                     chat_streamed(serve, user(PROMPTS[0]), tools=TOOLS, tool_choice=named("get_weather"))),
                    (chat(serve, user(PROMPTS[1]), tools=TOOLS, tool_choice="required", parallel_tool_calls=False),
                     chat_streamed(serve, user(PROMPTS[1]), tools=TOOLS, tool_choice="required",
                                   parallel_tool_calls=False)),
                    (replies["required_parallel"],
                     chat_streamed(serve, user(PROMPTS[1]), tools=TOOLS, tool_choice="required"))]
                history = [
                    {"role": "user", "content": PROMPTS[0]},
                    {"role": "assistant", "content": None, "tool_calls": [
                        {"id": "call_9", "type": "function",
                         "function": {"name": "get_weather", "arguments": '{"city": "Paris", "unit": "celsius"}'}}]},
                    {"role": "tool", "tool_call_id": "call_9", "content": "18 degrees, sunny"}]
                replies["history"] = chat(serve, history, tools=TOOLS, tool_choice="none")
                replies["history_without_result"] = chat(serve, history[:1], tools=TOOLS, tool_choice="none")
                if label == "speculative":
                    auto = {"tools": TOOLS, "extra_body": {"structured_outputs": {"regex": HERMES_CALL}}}
                    replies["auto"] = chat(serve, user(PROMPTS[0]), **auto)
                    replies["auto_streamed"] = chat_streamed(serve, user(PROMPTS[0]), **auto)
                    replies["auto_prose"] = chat(serve, user("Say hello."), tools=TOOLS, max_completion_tokens=8)
                    replies["raw"] = cls.raw_chat(serve, {"model": NAME, "messages": user(PROMPTS[1]),
                                                          "tools": TOOLS, "tool_choice": named("add"),
                                                          "max_tokens": 96, "temperature": 0})
                else:
                    try:
                        chat(serve, user(PROMPTS[0]), tools=TOOLS)
                        replies["auto_refused"] = None
                    except openai.BadRequestError as error:
                        replies["auto_refused"] = error
                cls.replies[label] = replies
            finally:
                serve.stop()

    @staticmethod
    def raw_chat(serve, body):
        connection = http.client.HTTPConnection("127.0.0.1", serve.port, timeout=300)
        connection.request("POST", "/v1/chat/completions", json.dumps(body), {"Content-Type": "application/json"})
        try:
            response = connection.getresponse()
            return response.status, json.loads(response.read())
        finally:
            connection.close()

    def check_calls(self, reply, allowed, at_most=None):
        self.assertEqual(reply["finish_reason"], "tool_calls", reply)
        self.assertIsNone(reply["content"], reply)
        self.assertGreaterEqual(len(reply["tool_calls"]), 1, reply)
        if at_most is not None:
            self.assertLessEqual(len(reply["tool_calls"]), at_most, reply)
        for call_id, kind, name, arguments in reply["tool_calls"]:
            self.assertTrue(call_id.startswith("call_"), call_id)
            self.assertEqual(kind, "function")
            self.assertIn(name, allowed)
            jsonschema.validate(json.loads(arguments), SCHEMAS[name])

    def test_a_named_function_gives_one_valid_call_of_it(self):
        for label, replies in self.replies.items():
            for i, reply in enumerate(replies["named"]):
                with self.subTest(label=label, prompt=i):
                    self.check_calls(reply, ["get_weather" if i % 2 == 0 else "add"], at_most=1)

    def test_required_gives_valid_calls_of_the_tools(self):
        for label, replies in self.replies.items():
            for i, reply in enumerate(replies["required"]):
                with self.subTest(label=label, prompt=i):
                    self.check_calls(reply, SCHEMAS.keys(), at_most=1)

    def test_a_forced_reply_cut_by_max_tokens_is_its_text(self):
        for label, replies in self.replies.items():
            reply = replies["required_parallel"]
            if reply["finish_reason"] == "tool_calls":
                self.check_calls(reply, SCHEMAS.keys())
            else:
                self.assertEqual(reply["finish_reason"], "length", label)
                self.assertEqual(reply["tool_calls"], [], label)
                self.assertTrue(reply["content"].startswith('[{"name": "'), reply)

    def test_greedy_with_speculation_equals_greedy_without(self):
        speculative, plain = self.replies["speculative"], self.replies["plain"]
        for kind in ("named", "required"):
            for a, b in zip(speculative[kind], plain[kind]):
                self.assertEqual(a["content"], b["content"])
                self.assertEqual([c[1:] for c in a["tool_calls"]], [c[1:] for c in b["tool_calls"]])
                self.assertEqual(a["finish_reason"], b["finish_reason"])
        for kind in ("history", "required_parallel"):
            self.assertEqual(speculative[kind]["content"], plain[kind]["content"])
        self.assertGreater(sum(r["accepted_tokens"] for r in speculative["named"] + speculative["required"]), 0,
                           "speculation never had a drafted token accepted")

    def test_streamed_replies_assemble_to_the_whole_ones(self):
        for label, replies in self.replies.items():
            pairs = list(replies["streamed"])
            if label == "speculative":
                pairs.append((replies["auto"], replies["auto_streamed"]))
            for whole, streamed in pairs:
                # Ids are per request; everything else is the same.
                self.assertEqual(whole["content"], streamed["content"], label)
                self.assertTrue(all(c[0].startswith("call_") for c in streamed["tool_calls"]))
                self.assertEqual(whole["finish_reason"], streamed["finish_reason"], label)
                if whole["finish_reason"] == "length" and not whole["tool_calls"]:
                    # Cut by max_tokens inside the forced array: the reply is its text, streamed
                    # as content too; the stream had already sent the pieces of the calls being
                    # written (as vLLM's do) and keeps them: calls the text holds, so far.
                    self.assertTrue(streamed["tool_calls"], label)
                    for _, kind, name, arguments in streamed["tool_calls"]:
                        self.assertEqual(kind, "function")
                        self.assertIn('"%s"' % name, whole["content"])
                        self.assertIn(arguments, whole["content"])
                    continue
                self.assertEqual([c[1:] for c in whole["tool_calls"]], [c[1:] for c in streamed["tool_calls"]])

    def test_streamed_arguments_come_in_pieces(self):
        # How many pieces a call takes follows how many tokens each step commits (a block
        # accepted whole may bring a call's arguments at once); ToolCallStreamTest counts them
        # exactly. Here: every streamed call has its arguments, and some came in several pieces.
        pieces = []
        for label, replies in self.replies.items():
            pairs = list(replies["streamed"])
            if label == "speculative":
                pairs.append((replies["auto"], replies["auto_streamed"]))
            for _, streamed in pairs:
                if streamed["finish_reason"] != "tool_calls":
                    continue  # cut by max_tokens: its last call may have no arguments yet
                self.assertTrue(streamed["argument_pieces"], (label, streamed))
                self.assertTrue(all(n >= 1 for n in streamed["argument_pieces"]), (label, streamed))
                pieces += streamed["argument_pieces"]
        self.assertGreater(max(pieces), 1, pieces)

    def test_auto_reads_the_models_call_with_the_parser(self):
        reply = self.replies["speculative"]["auto"]
        self.check_calls(reply, ["get_weather"], at_most=1)
        prose = self.replies["speculative"]["auto_prose"]
        self.assertEqual(prose["tool_calls"], [])
        self.assertTrue(prose["content"])

    def test_auto_without_a_parser_is_refused_naming_the_flag(self):
        error = self.replies["plain"]["auto_refused"]
        self.assertIsNotNone(error, "tool_choice auto was accepted without --tool-call-parser")
        self.assertIn("--tool-call-parser", str(error))
        self.assertEqual(error.body.get("param"), "tool_choice")

    def test_a_history_with_calls_and_results_reaches_the_prompt(self):
        for label, replies in self.replies.items():
            reply, shorter = replies["history"], replies["history_without_result"]
            self.assertIn(reply["finish_reason"], ("stop", "length"), label)
            self.assertEqual(reply["tool_calls"], [], label)  # tool_choice none: never parsed
            self.assertGreater(reply["prompt_tokens"], shorter["prompt_tokens"] + 20, label)

    def test_the_raw_reply_has_openais_shape(self):
        status, body = self.replies["speculative"]["raw"]
        self.assertEqual(status, 200, body)
        message = body["choices"][0]["message"]
        self.assertIsNone(message["content"])
        self.assertEqual(body["choices"][0]["finish_reason"], "tool_calls")
        (call,) = message["tool_calls"]
        self.assertTrue(call["id"].startswith("call_"))
        self.assertEqual(call["type"], "function")
        self.assertEqual(call["function"]["name"], "add")
        jsonschema.validate(json.loads(call["function"]["arguments"]), ADD)


if __name__ == "__main__":
    BINARY, MODEL = sys.argv[1], os.path.abspath(sys.argv[2])
    if not os.path.exists(MODEL):
        print(f"SKIPPED: no model at {MODEL}")
        sys.exit(77)
    sys.argv = sys.argv[:1]
    unittest.main()
