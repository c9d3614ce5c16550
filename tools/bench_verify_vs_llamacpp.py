#!/usr/bin/env python3
"""Verification-block cost curve of splitspec against llama.cpp's, same run.

  python3 tools/bench_verify_vs_llamacpp.py [--model PATH] [--threads 2] [--rounds 3]
                                            [--repeats 20] [--k 1,2,3,5,8,9,16] [--no-install]

The cost of verifying k drafted tokens is one forward of k new tokens of one sequence
after a prompt, with logits at every new position. Both sides do the same work:
  prompt   the 32-token prompt of `splitspec bench decode` (same LCG ids), decoded once
  block    k tokens (the LCG with seed 3), all logits, at positions 32 .. 32+k-1; the KV
           cache is truncated back to the prompt after each forward
  repeats  every k once per repeat, in order (interleaved, so that load from other
           processes hits all ks alike); per k the median over the repeats
splitspec: `splitspec bench verify` (its final JSON line). llama.cpp: llama-cpp-python on
the same GGUF with the same thread count (llama_decode of a k-token batch, logits_all).
The two sides alternate for --rounds rounds; per k the lowest median of the rounds is kept.
T(k)/T(1) is printed for both; the goal on the 2-core EPYC is T(5)/T(1) <= 1.3 and
T(9)/T(1) <= 1.6 for splitspec.

llama-cpp-python is installed on demand into build/llama-cpp-python (pip --target; it
compiles llama.cpp from source, ~20 minutes on 2 cores) unless --no-install is given.
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from bench_common import find_splitspec, lcg_tokens

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_MODEL = os.path.join(REPO, "models", "SmolLM2-135M-Instruct.Q4_1.gguf")
LLAMA_TARGET = os.path.join(REPO, "build", "llama-cpp-python")
PROMPT_TOKENS = 32
DEFAULT_KS = "1,2,3,5,8,9,16"


def import_llama_cpp(install):
    """llama_cpp, installing llama-cpp-python into LLAMA_TARGET first if needed and allowed."""
    if os.path.isdir(LLAMA_TARGET) and LLAMA_TARGET not in sys.path:
        sys.path.insert(0, LLAMA_TARGET)
    try:
        import llama_cpp
        return llama_cpp
    except ImportError:
        if not install:
            return None
    print("llama.cpp: installing llama-cpp-python into %s (builds llama.cpp from source; "
          "about 20 minutes on 2 cores)" % LLAMA_TARGET, flush=True)
    cmd = [sys.executable, "-m", "pip", "install", "--target", LLAMA_TARGET, "llama-cpp-python",
           "numpy"]
    if subprocess.run(cmd).returncode != 0:
        sys.exit("installing llama-cpp-python failed (command: %s)" % " ".join(cmd))
    sys.path.insert(0, LLAMA_TARGET)
    import llama_cpp
    return llama_cpp


def run_splitspec(binary, model, threads, repeats, ks):
    cmd = [binary, "bench", "verify", "--model", model, "--threads", str(threads),
           "--prompt-tokens", str(PROMPT_TOKENS), "--repeats", str(repeats),
           "--k", ",".join(str(k) for k in ks)]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit("splitspec bench verify failed: %s" % out.stderr.strip())
    lines = out.stdout.strip().splitlines()
    result = json.loads(lines[-1])
    return {int(k): v for k, v in result["verify_ms"].items()}, lines[:-1]


class LlamaCpp:
    def __init__(self, model, threads):
        from llama_cpp import Llama
        self.llm = Llama(model_path=model, n_ctx=512, n_batch=512, n_ubatch=512,
                         n_threads=threads, n_threads_batch=threads,
                         verbose=False)
        self.vocab = self.llm.n_vocab()

    def decode(self, tokens, n_past, logits_all):
        self.llm._batch.set_batch(batch=tokens, n_past=n_past, logits_all=logits_all)
        self.llm._ctx.decode(self.llm._batch)

    def truncate(self, length, prompt):
        """Drops positions >= length (or, without seq_rm, re-decodes the prompt)."""
        ctx = self.llm._ctx
        if hasattr(ctx, "kv_cache_seq_rm"):
            ctx.kv_cache_seq_rm(0, length, -1)
        else:
            ctx.kv_cache_clear()
            self.decode(prompt, 0, False)

    def verify_ms(self, prompt, block, ks, repeats):
        """Median ms per k of a k-token decode with all logits after `prompt`."""
        self.llm._ctx.kv_cache_clear()
        self.decode(prompt, 0, False)
        times = {k: [] for k in ks}
        for rep in range(-2, repeats):  # two warm-up rounds
            for k in ks:
                start = time.perf_counter()
                self.decode(block[:k], len(prompt), True)
                elapsed = 1e3 * (time.perf_counter() - start)
                self.truncate(len(prompt), prompt)
                if rep >= 0:
                    times[k].append(elapsed)
        return {k: statistics.median(v) for k, v in times.items()}


def curve_text(ms):
    return "  ".join("k=%d %.2f ms (%.2fx)" % (k, ms[k], ms[k] / ms[1]) for k in sorted(ms))


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=os.environ.get("SPLITSPEC_MODEL", DEFAULT_MODEL))
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--k", default=DEFAULT_KS, help="comma-separated, starting with 1")
    parser.add_argument("--no-install", action="store_true",
                        help="do not install llama-cpp-python when missing (splitspec only)")
    parser.add_argument("--splitspec", default=None, help="splitspec binary")
    args = parser.parse_args()
    ks = [int(k) for k in args.k.split(",")]
    if not ks or ks[0] != 1:
        sys.exit("--k must start with 1 (the ratios are relative to k = 1)")
    binary = find_splitspec(args.splitspec)
    print("command: %s" % " ".join([os.path.basename(sys.argv[0])] + sys.argv[1:]))
    print("machine: %s, %d CPUs, python %s" % (platform.processor() or platform.machine(),
                                               os.cpu_count(), platform.python_version()))
    llama_cpp = import_llama_cpp(not args.no_install)
    llama = None
    if llama_cpp is None:
        print("llama.cpp: llama-cpp-python is not installed (--no-install); splitspec only")
    else:
        llama = LlamaCpp(args.model, args.threads)
        print("llama.cpp: llama-cpp-python %s" % llama_cpp.__version__)
    ours = {k: float("inf") for k in ks}
    theirs = {k: float("inf") for k in ks}
    for rnd in range(args.rounds):
        ms, lines = run_splitspec(binary, args.model, args.threads, args.repeats, ks)
        if rnd == 0:
            print("\n".join("  splitspec| " + l for l in lines))
        ours = {k: min(ours[k], ms[k]) for k in ks}
        if llama is not None:
            prompt = lcg_tokens(PROMPT_TOKENS, llama.vocab, 1)
            block = lcg_tokens(max(ks), llama.vocab, 3)
            ms = llama.verify_ms(prompt, block, ks, args.repeats)
            theirs = {k: min(theirs[k], ms[k]) for k in ks}
    print("threads %d, per k the lowest of %d alternating rounds of median-of-%d forwards:" %
          (args.threads, args.rounds, args.repeats))
    print("  splitspec  %s" % curve_text(ours))
    if llama is not None:
        print("  llama.cpp  %s" % curve_text(theirs))
    summary = {"threads": args.threads, "prompt_tokens": PROMPT_TOKENS,
               "splitspec_verify_ms": {str(k): ours[k] for k in ks},
               "splitspec_verify_cost_ratio": {str(k): ours[k] / ours[1] for k in ks}}
    if llama is not None:
        summary.update({"llamacpp_verify_ms": {str(k): theirs[k] for k in ks},
                        "llamacpp_verify_cost_ratio": {str(k): theirs[k] / theirs[1] for k in ks},
                        "time_ratio_splitspec_over_llamacpp": {str(k): ours[k] / theirs[k]
                                                               for k in ks}})
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
