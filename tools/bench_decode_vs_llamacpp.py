#!/usr/bin/env python3
"""Decode and prefill speed of splitspec's CPU forward pass against llama.cpp, same run.

  python3 tools/bench_decode_vs_llamacpp.py [--model PATH] [--threads 2] [--repeats 2]

splitspec: `splitspec bench decode` (its final JSON line). llama.cpp: llama-cpp-python
on the same GGUF with the same thread count, the same token ids (the LCG below mirrors
tools/bench_command.cc), the same shape of work:
  decode   prefill a 32-token prompt, then 128 greedy 1-token llama_decode steps;
           tok/s = 128 / seconds of the 128 steps
  prefill  one llama_decode of 512 fresh tokens (logits of the last only);
           tok/s = 512 / seconds
The runs alternate (splitspec, llama.cpp, splitspec, ...) and the best of --repeats is
kept for each, so that load from other processes hits both alike.
ratio = splitspec tok/s / llama.cpp tok/s (> 1: splitspec faster).
"""
import argparse
import json
import os
import platform
import subprocess
import sys
import time
from bench_common import find_splitspec, lcg_tokens
bench_tokens = lcg_tokens

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_MODEL = os.path.join(REPO, "models", "SmolLM2-135M-Instruct.Q4_1.gguf")
PROMPT_TOKENS, DECODE_TOKENS, PREFILL_TOKENS = 32, 128, 512


def run_splitspec(binary, model, threads):
    cmd = [binary, "bench", "decode", "--model", model, "--threads", str(threads),
           "--prompt-tokens", str(PROMPT_TOKENS), "--decode-tokens", str(DECODE_TOKENS),
           "--prefill-tokens", str(PREFILL_TOKENS)]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit("splitspec bench failed: %s" % out.stderr.strip())
    lines = out.stdout.strip().splitlines()
    return json.loads(lines[-1]), lines[:-1]


class LlamaCpp:
    def __init__(self, model, threads):
        from llama_cpp import Llama
        self.llm = Llama(model_path=model, n_ctx=1024, n_batch=512, n_ubatch=512,
                         n_threads=threads, n_threads_batch=threads, verbose=False)
        self.vocab = self.llm.n_vocab()

    def decode_last(self, tokens, n_past):
        """llama_decode with logits for the last token only; returns its argmax."""
        import numpy as np
        self.llm._batch.set_batch(batch=tokens, n_past=n_past, logits_all=False)
        self.llm._ctx.decode(self.llm._batch)
        row = np.ctypeslib.as_array(self.llm._ctx.get_logits_ith(len(tokens) - 1),
                                    shape=(self.vocab,))
        return int(row.argmax())

    def decode_seconds(self, prompt, steps):
        self.llm._ctx.kv_cache_clear()
        token = self.decode_last(prompt, 0)
        start = time.perf_counter()
        for i in range(steps):
            token = self.decode_last([token], len(prompt) + i)
        return time.perf_counter() - start

    def prefill_seconds(self, tokens):
        self.llm._ctx.kv_cache_clear()
        start = time.perf_counter()
        self.decode_last(tokens, 0)
        return time.perf_counter() - start


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=os.environ.get("SPLITSPEC_MODEL", DEFAULT_MODEL))
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--splitspec", default=None, help="splitspec binary")
    args = parser.parse_args()
    binary = find_splitspec(args.splitspec)
    print("command: %s" % " ".join([os.path.basename(sys.argv[0])] + sys.argv[1:]))
    print("machine: %s, python %s" % (platform.processor() or platform.machine(),
                                      platform.python_version()))
    try:
        import llama_cpp
        llama = LlamaCpp(args.model, args.threads)
        print("llama.cpp: llama-cpp-python %s" % llama_cpp.__version__)
    except ImportError:
        llama = None
        print("llama.cpp: llama-cpp-python is NOT installed (pip install llama-cpp-python); "
              "printing splitspec only, no ratio")
    ours_decode = ours_prefill = llama_decode = llama_prefill = 0.0
    for rep in range(args.repeats):
        result, lines = run_splitspec(binary, args.model, args.threads)
        if rep == 0:
            print("\n".join("  splitspec| " + l for l in lines))
        ours_decode = max(ours_decode, result["decode_tok_s"])
        ours_prefill = max(ours_prefill, result["prefill_tok_s"])
        if llama is not None:
            vocab = llama.vocab
            prompt = bench_tokens(PROMPT_TOKENS, vocab, 1)
            prefill = bench_tokens(PREFILL_TOKENS, vocab, 2)
            if rep == 0:
                llama.decode_seconds(prompt[:8], 4)  # warm-up: pages in the weights
            llama_decode = max(llama_decode, DECODE_TOKENS / llama.decode_seconds(prompt,
                                                                                 DECODE_TOKENS))
            llama_prefill = max(llama_prefill, PREFILL_TOKENS / llama.prefill_seconds(prefill))
    print("threads %d, best of %d alternating runs:" % (args.threads, args.repeats))
    print("  decode  (%d tokens after %d): splitspec %.2f tok/s" %
          (DECODE_TOKENS, PROMPT_TOKENS, ours_decode) +
          ("" if llama is None else ", llama.cpp %.2f tok/s, ratio %.2f" %
           (llama_decode, ours_decode / llama_decode)))
    print("  prefill (%d tokens):          splitspec %.2f tok/s" % (PREFILL_TOKENS, ours_prefill) +
          ("" if llama is None else ", llama.cpp %.2f tok/s, ratio %.2f" %
           (llama_prefill, ours_prefill / llama_prefill)))
    summary = {"threads": args.threads, "splitspec_decode_tok_s": ours_decode,
               "splitspec_prefill_tok_s": ours_prefill}
    if llama is not None:
        summary.update({"llamacpp_decode_tok_s": llama_decode,
                        "llamacpp_prefill_tok_s": llama_prefill,
                        "decode_ratio": ours_decode / llama_decode,
                        "prefill_ratio": ours_prefill / llama_prefill})
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
