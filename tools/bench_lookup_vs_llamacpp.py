#!/usr/bin/env python3
"""splitspec's lookup drafter against llama.cpp's prompt lookup, per workload category.

  python3 tools/bench_lookup_vs_llamacpp.py [--workload bench/workloads/suite.jsonl]
      [--model PATH] [--threads 1] [--limit N] [--k auto|K] [--install]

Greedy decoding (temperature 0) of every request of the workload file (chat template
applied), on the same GGUF with the same thread count:
  splitspec  `splitspec bench spec --workload FILE --drafters lookup --json`: rows
             "target-only" and "lookup auto" (or "lookup k=K")
  llama.cpp  llama-cpp-python: Llama(...) alone, and Llama(..., draft_model=
             LlamaPromptLookupDecoding(num_pred_tokens, max_ngram_size)); the two are
             interleaved per request. Its acceptance is measured by recording every
             proposal and comparing it with the greedy output that followed: accepted =
             the proposal's prefix that the output repeats, verified = accepted + 1 when
             the proposal went on past a mismatch (splitspec's definition).
Prints per category: acceptance of both, tok/s of both, each one's ratio to its own
target-only run, and splitspec lookup tok/s / llama.cpp prompt-lookup tok/s (goal >= 1.3).
llama-cpp-python is not installed by default (building it takes ~20 minutes on 2 cores);
--install runs `pip install llama-cpp-python` first.
"""
import argparse
import collections
import json
import os
import platform
import subprocess
import sys
import time
from bench_common import find_splitspec

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_MODEL = os.path.join(REPO, "models", "SmolLM2-135M-Instruct.Q4_1.gguf")
DEFAULT_WORKLOAD = os.path.join(REPO, "bench", "workloads", "suite.jsonl")


def load_workload(path, limit):
    taken = collections.Counter()
    requests = []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            request = json.loads(line)
            taken[request["category"]] += 1
            if limit and taken[request["category"]] > limit:
                continue
            requests.append(request)
    return requests


def run_splitspec(binary, args):
    cmd = [binary, "bench", "spec", "--workload", args.workload, "--model", args.model,
           "--threads", str(args.threads), "--drafters", "lookup", "--json"]
    if args.k != "auto":
        cmd += ["--k", args.k]
    if args.limit:
        cmd += ["--limit", str(args.limit)]
    print("splitspec: %s" % " ".join(cmd))
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit("splitspec bench spec failed: %s" % out.stderr.strip())
    rows = {}
    for line in out.stdout.splitlines():
        row = json.loads(line)
        rows[(row["category"], row["configuration"])] = row
    return rows


class LlamaCpp:
    """The target alone and with prompt lookup, greedy, with proposals recorded."""

    def __init__(self, model, threads, num_pred_tokens, max_ngram_size):
        from llama_cpp import Llama
        from llama_cpp.llama_speculative import LlamaPromptLookupDecoding
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter

        class RecordingLookup(LlamaPromptLookupDecoding):
            def __init__(self, **kwargs):
                super().__init__(**kwargs)
                self.proposals = []

            def __call__(self, input_ids, **kwargs):
                proposal = super().__call__(input_ids, **kwargs)
                self.proposals.append((len(input_ids), [int(t) for t in proposal]))
                return proposal

        common = dict(model_path=model, n_ctx=2048, n_threads=threads, n_threads_batch=threads,
                      verbose=False)
        self.alone = Llama(**common)
        self.lookup_draft = RecordingLookup(num_pred_tokens=num_pred_tokens,
                                            max_ngram_size=max_ngram_size)
        self.lookup = Llama(draft_model=self.lookup_draft, **common)
        template = self.alone.metadata["tokenizer.chat_template"]
        eos = self.alone.detokenize([self.alone.token_eos()]).decode("utf-8", "replace")
        bos = self.alone.detokenize([self.alone.token_bos()]).decode("utf-8", "replace")
        self.formatter = Jinja2ChatFormatter(template=template, eos_token=eos, bos_token=bos)

    def prompt_tokens(self, messages):
        text = self.formatter(messages=messages).prompt
        return self.alone.tokenize(text.encode("utf-8"), add_bos=False, special=True)

    @staticmethod
    def generate(llm, prompt, max_tokens):
        """Greedy tokens after `prompt` (stops at end of generation) and the seconds taken."""
        tokens = []
        start = time.perf_counter()
        for token in llm.generate(prompt, temp=0.0, top_k=1, reset=True):
            if token == llm.token_eos() or len(tokens) >= max_tokens:
                break
            tokens.append(int(token))
        return tokens, time.perf_counter() - start

    def acceptance_counts(self, prompt, tokens):
        """(accepted, verified) of the proposals recorded during one generation."""
        full = list(prompt) + tokens
        accepted = verified = 0
        for position, proposal in self.lookup_draft.proposals:
            for i, token in enumerate(proposal):
                if position + i >= len(full):
                    break
                verified += 1
                if full[position + i] != token:
                    break
                accepted += 1
        self.lookup_draft.proposals = []
        return accepted, verified


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workload", default=DEFAULT_WORKLOAD)
    parser.add_argument("--model", default=os.environ.get("SPLITSPEC_MODEL", DEFAULT_MODEL))
    parser.add_argument("--threads", type=int, default=1, help="target threads, both sides")
    parser.add_argument("--limit", type=int, default=0, help="first N requests per category")
    parser.add_argument("--k", default="auto", help="splitspec draft length: auto or K")
    parser.add_argument("--num-pred-tokens", type=int, default=10,
                        help="llama.cpp prompt lookup: tokens proposed")
    parser.add_argument("--max-ngram-size", type=int, default=2,
                        help="llama.cpp prompt lookup: longest n-gram matched")
    parser.add_argument("--install", action="store_true", help="pip install llama-cpp-python")
    parser.add_argument("--splitspec", default=None, help="splitspec binary")
    args = parser.parse_args()
    if args.install:
        subprocess.run([sys.executable, "-m", "pip", "install", "llama-cpp-python"], check=True)
    binary = find_splitspec(args.splitspec)
    print("command: %s" % " ".join([os.path.basename(sys.argv[0])] + sys.argv[1:]))
    print("machine: %s, python %s, greedy, %d thread(s)" %
          (platform.processor() or platform.machine(), platform.python_version(), args.threads))
    try:
        import llama_cpp
    except ImportError:
        sys.exit("llama-cpp-python is NOT installed: pip install llama-cpp-python (or --install)")
    print("llama.cpp: llama-cpp-python %s, LlamaPromptLookupDecoding(num_pred_tokens=%d, "
          "max_ngram_size=%d)" % (llama_cpp.__version__, args.num_pred_tokens, args.max_ngram_size))

    ours = run_splitspec(binary, args)
    llama = LlamaCpp(args.model, args.threads, args.num_pred_tokens, args.max_ngram_size)
    totals = collections.defaultdict(lambda: collections.Counter())
    requests = load_workload(args.workload, args.limit)
    llama.generate(llama.alone, llama.prompt_tokens(requests[0]["messages"])[:8], 4)  # warm-up
    for n, request in enumerate(requests, 1):
        prompt = llama.prompt_tokens(request["messages"])
        t = totals[request["category"]]
        tokens, seconds = llama.generate(llama.alone, prompt, request["max_tokens"])
        t["alone_tokens"] += len(tokens)
        t["alone_seconds"] += seconds
        llama.lookup_draft.proposals = []
        tokens, seconds = llama.generate(llama.lookup, prompt, request["max_tokens"])
        accepted, verified = llama.acceptance_counts(prompt, tokens)
        t["lookup_tokens"] += len(tokens)
        t["lookup_seconds"] += seconds
        t["accepted"] += accepted
        t["verified"] += verified
        print("llama.cpp: %d/%d requests done" % (n, len(requests)), file=sys.stderr)

    config = "lookup auto" if args.k == "auto" else "lookup k=%s" % args.k
    print("\n| category      | accept ours | accept llama.cpp | ours tok/s (x own target) "
          "| llama.cpp tok/s (x own target) | ours / llama.cpp |")
    print("|---------------|-------------|------------------|---------------------------"
          "|--------------------------------|------------------|")
    summary = []
    for category, t in totals.items():
        row = ours.get((category, config))
        if row is None:
            continue
        llama_alone = t["alone_tokens"] / t["alone_seconds"]
        llama_lookup = t["lookup_tokens"] / t["lookup_seconds"]
        llama_accept = t["accepted"] / t["verified"] if t["verified"] else 0.0
        ratio = row["tok_s"] / llama_lookup
        print("| %-13s | %11.3f | %16.3f | %12.2f (%5.2fx)       "
              "| %14.2f (%5.2fx)        | %15.2fx |" %
              (category, row["acceptance"], llama_accept, row["tok_s"], row["ratio_to_target_only"],
               llama_lookup, llama_lookup / llama_alone, ratio))
        summary.append({"category": category, "splitspec_acceptance": row["acceptance"],
                        "llamacpp_acceptance": llama_accept, "splitspec_tok_s": row["tok_s"],
                        "llamacpp_lookup_tok_s": llama_lookup,
                        "llamacpp_target_only_tok_s": llama_alone,
                        "ratio_vs_llamacpp_lookup": ratio})
    for s in summary:
        print(json.dumps(s))
    return 0


if __name__ == "__main__":
    sys.exit(main())
