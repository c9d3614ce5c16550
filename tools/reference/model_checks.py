"""The model parts of tools/reference/check_vs_llamacpp.py: splitspec's forward pass
against llama.cpp (llama-cpp-python) on the same GGUF file.

  logits  next-token distributions at every position of PROMPTS: mean KL(llama.cpp ||
          splitspec) and top-1 agreement. Acceptance: mean KL < 1e-3, top-1 >= 99%.
  greedy  128-token greedy continuations of PROMPTS (end-of-text ignored): identical
          token ids, or the first divergence with both engines' top-2 logit margins
          there (a small margin means a near-tie that float rounding can flip).

splitspec runs through its CLI (`splitspec logits --all-positions`, `splitspec
generate --json --ignore-eos`) as a subprocess, found at --splitspec, $SPLITSPEC_BIN
or build/*/bin/splitspec.
"""
import json
import math
import os
import subprocess
import sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from bench_common import find_splitspec  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

PROMPTS = [
    "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n",
    "The quick brown fox jumps over the lazy dog. Once upon a time, in a small village,",
    "def fibonacci(n):\n    if n < 2:\n        return n\n",
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n"
    "Explain photosynthesis in two sentences.<|im_end|>\n<|im_start|>assistant\n",
    "1, 2, 3, 5, 8, 13, 21, 34,",
]
GREEDY_TOKENS = 128
# A divergence is called a near-tie when both engines' top-2 margins there are below
# this many logits: the logits part measures per-position differences of this order
# between the engines (int8 activation quantization noise in both).
NEAR_TIE_LOGITS = 0.25
KL_LIMIT = 1e-3
TOP1_LIMIT = 0.99


def load_llama(model_path, threads, logits_all):
    try:
        from llama_cpp import Llama
    except ImportError:
        sys.exit("llama-cpp-python is not installed (pip install llama-cpp-python); "
                 "cannot compare against llama.cpp")
    return Llama(model_path=model_path, n_ctx=1024, n_batch=512, n_threads=threads,
                 n_threads_batch=threads, logits_all=logits_all, verbose=False)


def prompt_ids(llm, text):
    return llm.tokenize(text.encode("utf-8"), add_bos=True, special=True)


def run_splitspec(binary, args):
    out = subprocess.run([binary] + args, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit("splitspec %s failed (%d): %s" % (args[0], out.returncode, out.stderr.strip()))
    return json.loads(out.stdout.strip().splitlines()[-1])


def top2_margin(row):
    best = sorted(range(len(row)), key=lambda i: row[i], reverse=True)[:2]
    return best[0], row[best[0]] - row[best[1]]


def part_logits(args):
    import numpy as np
    binary = find_splitspec(getattr(args, "splitspec", None))
    llm = load_llama(args.model, getattr(args, "threads", 2), logits_all=True)
    kls, self_kls, agree, total = [], [], 0, 0
    for n, text in enumerate(PROMPTS):
        ids = prompt_ids(llm, text)
        llm.reset()
        llm.eval(ids)
        ref = np.array(llm.scores[:len(ids)], dtype=np.float64)
        ours = np.array(run_splitspec(binary, ["logits", "--model", args.model, "--prompt-ids",
                                               ",".join(map(str, ids)), "--all-positions"])
                        ["logits"], dtype=np.float64)
        if ours.shape != ref.shape:
            sys.exit("logits: prompt %d: shape %s from splitspec, %s from llama.cpp" %
                     (n, ours.shape, ref.shape))
        lp = ref - ref.max(axis=1, keepdims=True)
        lp -= np.log(np.exp(lp).sum(axis=1, keepdims=True))
        lq = ours - ours.max(axis=1, keepdims=True)
        lq -= np.log(np.exp(lq).sum(axis=1, keepdims=True))
        prompt_kl = (np.exp(lp) * (lp - lq)).sum(axis=1)
        same = int((ref.argmax(axis=1) == ours.argmax(axis=1)).sum())
        # llama.cpp's own noise floor: the same positions decoded one token at a time.
        llm._ctx.kv_cache_clear()
        seq = np.array([decode_last(llm, [t], i) for i, t in enumerate(ids)])
        ls = seq - seq.max(axis=1, keepdims=True)
        ls -= np.log(np.exp(ls).sum(axis=1, keepdims=True))
        self_kls.extend((np.exp(lp) * (lp - ls)).sum(axis=1).tolist())
        kls.extend(prompt_kl.tolist())
        agree += same
        total += len(ids)
        print("logits: prompt %d: %d positions, mean KL %.3g, max KL %.3g, top-1 %d/%d, "
              "max |logit diff| %.3g" % (n, len(ids), prompt_kl.mean(), prompt_kl.max(), same,
                                        len(ids), np.abs(ref - ours).max()))
    print("logits: llama.cpp batch vs its own token-by-token decode: mean KL %.3g "
          "(the reference's noise floor)" % (sum(self_kls) / len(self_kls)))
    mean_kl = sum(kls) / len(kls)
    top1 = agree / total
    ok = mean_kl < KL_LIMIT and top1 >= TOP1_LIMIT
    print("logits: %d positions, mean KL %.3g (limit %g), top-1 agreement %.2f%% (limit %.0f%%): %s"
          % (total, mean_kl, KL_LIMIT, 100 * top1, 100 * TOP1_LIMIT, "PASS" if ok else "FAIL"))
    return 0 if ok else 1


def decode_last(llm, tokens, n_past):
    """llama_decode of `tokens` at positions n_past.. with logits for the last one only.

    Goes below Llama.eval, which in llama-cpp-python 0.3.x keeps no logits unless
    logits_all=True (and then computes the output head for every position)."""
    import numpy as np
    llm._batch.set_batch(batch=tokens, n_past=n_past, logits_all=False)
    llm._ctx.decode(llm._batch)
    return np.ctypeslib.as_array(llm._ctx.get_logits_ith(len(tokens) - 1),
                                 shape=(llm.n_vocab(),)).astype(np.float64)


def llama_greedy(llm, ids, steps):
    """Greedy continuation with llama.cpp; returns (tokens, top-2 margin per step)."""
    import numpy as np
    llm._ctx.kv_cache_clear()
    row = decode_last(llm, ids, 0)
    tokens, margins = [], []
    for i in range(steps):
        order = np.argsort(-row, kind="stable")[:2]
        tokens.append(int(order[0]))
        margins.append(float(row[order[0]] - row[order[1]]))
        if i + 1 < steps:
            row = decode_last(llm, [tokens[-1]], len(ids) + i)
    return tokens, margins


def part_greedy(args):
    binary = find_splitspec(getattr(args, "splitspec", None))
    llm = load_llama(args.model, getattr(args, "threads", 2), logits_all=False)
    identical = 0
    for n, text in enumerate(PROMPTS):
        ids = prompt_ids(llm, text)
        ref, margins = llama_greedy(llm, ids, GREEDY_TOKENS)
        ours = run_splitspec(binary, ["generate", "--target", args.model, "--drafter", "none",
                                      "--prompt-ids", ",".join(map(str, ids)), "--max-tokens",
                                      str(GREEDY_TOKENS), "--temperature", "0", "--ignore-eos",
                                      "--json"])["token_ids"]
        if ours == ref:
            identical += 1
            print("greedy: prompt %d: %d tokens identical" % (n, len(ref)))
            continue
        i = next(k for k in range(min(len(ours), len(ref))) if ours[k] != ref[k])
        ours_logits = run_splitspec(binary, ["logits", "--model", args.model, "--prompt-ids",
                                             ",".join(map(str, ids + ref[:i]))])["logits"]
        our_top, our_margin = top2_margin(ours_logits)
        # llama.cpp's reference tokens come from its 1-token decode path; its batch path
        # (other kernels) over the same prefix tells which of the two engines' choices
        # llama.cpp itself makes when it computes the position the way splitspec does.
        llm._ctx.kv_cache_clear()
        batch_row = decode_last(llm, ids + ref[:i], 0)
        batch_top = int(batch_row.argmax())
        print("greedy: prompt %d: diverges at generated token %d: llama.cpp %d (top-2 margin "
              "%.4f), splitspec %d (its margin %.4f, its logit for llama.cpp's token %.4f lower)"
              " -> %s; llama.cpp's batch forward of the same prefix picks %d (%s)"
              % (n, i, ref[i], margins[i], ours[i], our_margin,
                 ours_logits[our_top] - ours_logits[ref[i]],
                 "near-tie" if max(margins[i], our_margin) < NEAR_TIE_LOGITS else "NOT a near-tie",
                 batch_top, "= splitspec's" if batch_top == ours[i] else
                 ("= llama.cpp decode's" if batch_top == ref[i] else "neither")))
    print("greedy: %d / %d continuations identical: %s" %
          (identical, len(PROMPTS), "PASS" if identical == len(PROMPTS) else "FAIL"))
    return 0 if identical == len(PROMPTS) else 1
