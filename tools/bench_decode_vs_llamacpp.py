#!/usr/bin/env python3
"""Decode and prefill speed of splitspec's CPU forward pass against llama.cpp, same run.

  python3 tools/bench_decode_vs_llamacpp.py [--model PATH] [--threads 2] [--repeats 2]
  python3 tools/bench_decode_vs_llamacpp.py --contexts 2048,6000 [--decode-tokens 64]

splitspec: `splitspec bench decode` (its final JSON line). llama.cpp: llama-cpp-python
on the same GGUF with the same thread count, the same token ids (the LCG below mirrors
tools/bench_command.cc), the same shape of work:
  decode   prefill a 32-token prompt, then 128 greedy 1-token llama_decode steps;
           tok/s = 128 / seconds of the 128 steps
  prefill  one llama_decode of 512 fresh tokens (logits of the last only);
           tok/s = 512 / seconds
With --contexts C1,C2,...: at each context C, a prefill of C fresh tokens (timed:
splitspec in one forward, `bench decode --context`; llama.cpp in llama_decode calls of
n_batch = 512 tokens, as its own tools feed a prompt), then --decode-tokens greedy steps
(decode tok/s at that context). llama.cpp runs twice, without and with its flash
attention (flash_attn), each with an F16 KV cache (its default), and the ratios are
against each.
The runs alternate (splitspec, llama.cpp, splitspec, ...) and the best of --repeats is
kept for each, so that load from other processes hits both alike; the 1-minute load
average is printed before each run.
ratio = splitspec tok/s / llama.cpp tok/s (> 1: splitspec faster); for prefill times,
llama.cpp seconds / splitspec seconds.
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


def load_average():
    return os.getloadavg()[0]


def run_splitspec_contexts(binary, model, threads, contexts, decode_tokens):
    cmd = [binary, "bench", "decode", "--model", model, "--threads", str(threads),
           "--prompt-tokens", str(PROMPT_TOKENS), "--decode-tokens", str(decode_tokens),
           "--prefill-tokens", str(PREFILL_TOKENS),
           "--context", ",".join(str(c) for c in contexts)]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit("splitspec bench failed: %s" % out.stderr.strip())
    lines = out.stdout.strip().splitlines()
    return json.loads(lines[-1]), lines[:-1]


class LlamaCpp:
    def __init__(self, model, threads, n_ctx=1024, flash_attn=None):
        from llama_cpp import Llama
        import inspect
        kwargs = dict(model_path=model, n_ctx=n_ctx, n_batch=512, n_ubatch=512,
                      n_threads=threads, n_threads_batch=threads, verbose=False)
        if flash_attn is not None:
            params = inspect.signature(Llama.__init__).parameters
            if "flash_attn_type" in params:  # newer llama.cpp: an enum (auto, on, off)
                kwargs["flash_attn_type"] = 1 if flash_attn else 0
            else:
                kwargs["flash_attn"] = flash_attn
        self.llm = Llama(**kwargs)
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

    def context_seconds(self, prompt, steps, n_batch=512):
        """(prefill seconds of `prompt` in n_batch pieces, seconds of `steps` greedy steps)."""
        self.llm._ctx.kv_cache_clear()
        start = time.perf_counter()
        for begin in range(0, len(prompt), n_batch):
            token = self.decode_last(prompt[begin:begin + n_batch], begin)
        prefill = time.perf_counter() - start
        start = time.perf_counter()
        for i in range(steps):
            token = self.decode_last([token], len(prompt) + i)
        return prefill, time.perf_counter() - start


def contexts_main(args, binary):
    contexts = [int(c) for c in args.contexts.split(",")]
    steps = args.decode_tokens
    try:
        import llama_cpp
        n_ctx = max(contexts) + steps + 16
        engines = [("llama.cpp", LlamaCpp(args.model, args.threads, n_ctx, flash_attn=False)),
                   ("llama.cpp FA", LlamaCpp(args.model, args.threads, n_ctx, flash_attn=True))]
        print("llama.cpp: llama-cpp-python %s, F16 KV cache, n_batch 512, flash_attn off / on" %
              llama_cpp.__version__)
    except ImportError:
        engines = []
        print("llama.cpp: llama-cpp-python is NOT installed; printing splitspec only")
    best = {}  # (engine, context) -> [decode tok/s, prefill seconds]
    loads = {}  # engine -> 1-minute load averages before its runs

    def keep(engine, context, decode_tps, prefill_s):
        old = best.get((engine, context), [0.0, float("inf")])
        best[(engine, context)] = [max(old[0], decode_tps), min(old[1], prefill_s)]

    for rep in range(args.repeats):
        loads.setdefault("splitspec", []).append(load_average())
        print("repeat %d: load average %.2f before splitspec" % (rep, loads["splitspec"][-1]),
              flush=True)
        result, lines = run_splitspec_contexts(binary, args.model, args.threads, contexts, steps)
        if rep == 0:
            print("\n".join("  splitspec| " + l for l in lines))
        for c in contexts:
            r = result["contexts"][str(c)]
            keep("splitspec", c, r["decode_tok_s"], r["prefill_s"])
            print("  splitspec context %d: decode %.2f tok/s, prefill %.3f s (load %.2f after)" %
                  (c, r["decode_tok_s"], r["prefill_s"], load_average()), flush=True)
        for name, engine in engines:
            loads.setdefault(name, []).append(load_average())
            print("repeat %d: load average %.2f before %s" % (rep, loads[name][-1], name),
                  flush=True)
            vocab = engine.vocab
            if rep == 0:
                engine.decode_seconds(bench_tokens(8, vocab, 1), 4)  # warm-up
            for c in contexts:
                prefill_s, decode_s = engine.context_seconds(bench_tokens(c, vocab, 4), steps)
                keep(name, c, steps / decode_s, prefill_s)
                print("  %s context %d: decode %.2f tok/s, prefill %.3f s (load %.2f after)" %
                      (name, c, steps / decode_s, prefill_s, load_average()), flush=True)
    print("threads %d, best of %d alternating runs, %d decode steps after each context:" %
          (args.threads, args.repeats, steps))
    for name, values in loads.items():
        print("  load average before %s: %s" % (name, ", ".join("%.1f" % x for x in values)))
    summary = {"threads": args.threads, "decode_tokens": steps, "contexts": {},
               "load_average": loads}
    for c in contexts:
        ours = best[("splitspec", c)]
        line = "  context %5d: splitspec decode %7.2f tok/s, prefill %7.3f s" % (c, ours[0], ours[1])
        entry = {"splitspec_decode_tok_s": ours[0], "splitspec_prefill_s": ours[1]}
        for name, _ in engines:
            theirs = best[(name, c)]
            line += ("; %s %7.2f tok/s (ratio %.2f), prefill %7.3f s (ratio %.2f)" %
                     (name, theirs[0], ours[0] / theirs[0], theirs[1], theirs[1] / ours[1]))
            key = name.replace(" ", "_").replace(".", "")
            entry.update({key + "_decode_tok_s": theirs[0], key + "_prefill_s": theirs[1],
                          key + "_decode_ratio": ours[0] / theirs[0],
                          key + "_prefill_ratio": theirs[1] / ours[1]})
        print(line)
        summary["contexts"][str(c)] = entry
    print(json.dumps(summary))
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=os.environ.get("SPLITSPEC_MODEL", DEFAULT_MODEL))
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--splitspec", default=None, help="splitspec binary")
    parser.add_argument("--contexts", default=None,
                        help="comma-separated contexts: prefill and decode at each (see above)")
    parser.add_argument("--decode-tokens", type=int, default=64,
                        help="with --contexts: greedy steps timed after each context")
    args = parser.parse_args()
    binary = find_splitspec(args.splitspec)
    print("command: %s" % " ".join([os.path.basename(sys.argv[0])] + sys.argv[1:]))
    print("machine: %s, python %s" % (platform.processor() or platform.machine(),
                                      platform.python_version()))
    if args.contexts:
        return contexts_main(args, binary)
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
