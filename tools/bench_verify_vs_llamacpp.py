#!/usr/bin/env python3
"""Verification-block cost curve of splitspec against llama.cpp's, same run.

  python3 tools/bench_verify_vs_llamacpp.py [--model PATH] [--threads 2] [--rounds 3]
                                            [--repeats 20] [--k 1,2,3,5,8,9,16] [--no-install]
                                            [--prompt-tokens 32] [--flash-attn]

The cost of verifying k drafted tokens is one forward of k new tokens of one sequence
after a prompt, with logits at every new position. Both sides do the same work:
  prompt   --prompt-tokens (32: the prompt of `splitspec bench decode`, same LCG ids),
           decoded once (llama.cpp: in pieces of n_batch = 512)
  block    k tokens (the LCG with seed 3), all logits, at positions 32 .. 32+k-1; the KV
           cache is truncated back to the prompt after each forward
  repeats  every k once per repeat, in order (interleaved, so that load from other
           processes hits all ks alike); per k the median over the repeats
splitspec: `splitspec bench verify` (its final JSON line). llama.cpp: llama-cpp-python on
the same GGUF with the same thread count (llama_decode of a k-token batch, logits_all),
F16 KV cache; with --flash-attn also a second llama.cpp context with its flash attention.
The two sides alternate for --rounds rounds; per k the lowest median of the rounds is kept.
The 1-minute load average is printed before each side's run (the machine may be shared).
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


def run_splitspec(binary, model, threads, repeats, ks, prompt_tokens):
    cmd = [binary, "bench", "verify", "--model", model, "--threads", str(threads),
           "--prompt-tokens", str(prompt_tokens), "--repeats", str(repeats),
           "--k", ",".join(str(k) for k in ks)]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit("splitspec bench verify failed: %s" % out.stderr.strip())
    lines = out.stdout.strip().splitlines()
    result = json.loads(lines[-1])
    return {int(k): v for k, v in result["verify_ms"].items()}, lines[:-1]


class LlamaCpp:
    N_BATCH = 512

    def __init__(self, model, threads, n_ctx=512, flash_attn=None):
        from llama_cpp import Llama
        import inspect
        kwargs = dict(model_path=model, n_ctx=max(512, n_ctx), n_batch=self.N_BATCH,
                      n_ubatch=self.N_BATCH, n_threads=threads, n_threads_batch=threads,
                      verbose=False)
        if flash_attn is not None:
            params = inspect.signature(Llama.__init__).parameters
            if "flash_attn_type" in params:  # newer llama.cpp: an enum (auto, on, off)
                kwargs["flash_attn_type"] = 1 if flash_attn else 0
            else:
                kwargs["flash_attn"] = flash_attn
        self.llm = Llama(**kwargs)
        self.vocab = self.llm.n_vocab()

    def decode(self, tokens, n_past, logits_all):
        for begin in range(0, len(tokens), self.N_BATCH):  # a long prompt in n_batch pieces
            self.llm._batch.set_batch(batch=tokens[begin:begin + self.N_BATCH],
                                      n_past=n_past + begin, logits_all=logits_all)
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
    parser.add_argument("--prompt-tokens", type=int, default=PROMPT_TOKENS,
                        help="context before the verification block")
    parser.add_argument("--flash-attn", action="store_true",
                        help="also time llama.cpp with its flash attention")
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
    engines = []  # (name, LlamaCpp)
    if llama_cpp is None:
        print("llama.cpp: llama-cpp-python is not installed (--no-install); splitspec only")
    else:
        n_ctx = args.prompt_tokens + max(ks) + 16
        engines.append(("llama.cpp", LlamaCpp(args.model, args.threads, n_ctx,
                                              flash_attn=False if args.flash_attn else None)))
        if args.flash_attn:
            engines.append(("llama.cpp FA", LlamaCpp(args.model, args.threads, n_ctx,
                                                     flash_attn=True)))
        print("llama.cpp: llama-cpp-python %s, F16 KV cache%s" %
              (llama_cpp.__version__, ", flash_attn off / on" if args.flash_attn else ""))
    best = {"splitspec": {k: float("inf") for k in ks}}
    loads = {"splitspec": []}
    for name, _ in engines:
        best[name] = {k: float("inf") for k in ks}
        loads[name] = []
    for rnd in range(args.rounds):
        loads["splitspec"].append(os.getloadavg()[0])
        print("round %d: load average %.2f before splitspec" % (rnd, loads["splitspec"][-1]),
              flush=True)
        ms, lines = run_splitspec(binary, args.model, args.threads, args.repeats, ks,
                                  args.prompt_tokens)
        if rnd == 0:
            print("\n".join("  splitspec| " + l for l in lines))
        best["splitspec"] = {k: min(best["splitspec"][k], ms[k]) for k in ks}
        for name, llama in engines:
            loads[name].append(os.getloadavg()[0])
            print("round %d: load average %.2f before %s" % (rnd, loads[name][-1], name),
                  flush=True)
            prompt = lcg_tokens(args.prompt_tokens, llama.vocab, 1)
            block = lcg_tokens(max(ks), llama.vocab, 3)
            ms = llama.verify_ms(prompt, block, ks, args.repeats)
            best[name] = {k: min(best[name][k], ms[k]) for k in ks}
    print("threads %d, %d-token context, per k the lowest of %d alternating rounds of "
          "median-of-%d forwards:" % (args.threads, args.prompt_tokens, args.rounds, args.repeats))
    ours = best["splitspec"]
    for name in best:
        print("  %-12s %s  (load %s)" % (name, curve_text(best[name]),
                                         ", ".join("%.1f" % x for x in loads[name])))
    summary = {"threads": args.threads, "prompt_tokens": args.prompt_tokens,
               "splitspec_verify_ms": {str(k): ours[k] for k in ks},
               "splitspec_verify_cost_ratio": {str(k): ours[k] / ours[1] for k in ks},
               "load_average": loads}
    for name, _ in engines:
        theirs = best[name]
        key = name.replace(" ", "_").replace(".", "")
        summary.update({key + "_verify_ms": {str(k): theirs[k] for k in ks},
                        key + "_verify_cost_ratio": {str(k): theirs[k] / theirs[1] for k in ks},
                        "time_ratio_splitspec_over_" + key: {str(k): ours[k] / theirs[k]
                                                             for k in ks}})
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
