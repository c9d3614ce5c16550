#!/usr/bin/env python3
"""HF transformers beside splitspec on the lent GPU: decode tok/s of a LlamaForCausalLM with
SmolLM2-135M's configuration (30 layers, hidden 576, intermediate 1536, 9 heads / 3 KV heads,
vocabulary 49152, RoPE base 1e5, tied embeddings) and RANDOM weights in float16, built from the
configuration alone (the machine reaches no registry; a forward costs the same as with the real
weights). Prints one JSON line per batch size: prefill and decode seconds, decode tok/s.

  python3 tools/gpu/bench_hf.py --batch 1,8 --prefill-tokens 512 --decode-tokens 128
  python3 tools/gpu/bench_hf.py --check     # exit 0 if torch with CUDA and transformers import

Greedy decoding through generate() with a KV cache, min_new_tokens = max_new_tokens so every
run decodes the same number of tokens; CUDA is synchronized around each timed region. The
weights are random, so the text is meaningless: only the timing is reported.
"""
import argparse
import json
import sys
import time


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch", default="1", help="comma-separated batch sizes")
    parser.add_argument("--prefill-tokens", type=int, default=512)
    parser.add_argument("--decode-tokens", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--check", action="store_true", help="only check the imports")
    return parser.parse_args()


def smollm2_config(transformers):
    return transformers.LlamaConfig(
        vocab_size=49152, hidden_size=576, intermediate_size=1536, num_hidden_layers=30,
        num_attention_heads=9, num_key_value_heads=3, max_position_embeddings=8192,
        rope_theta=100000.0, rms_norm_eps=1e-5, tie_word_embeddings=True)


def timed(torch, fn):
    torch.cuda.synchronize()
    start = time.perf_counter()
    result = fn()
    torch.cuda.synchronize()
    return time.perf_counter() - start, result


def main():
    args = parse_args()
    try:
        import torch
        import transformers
    except ImportError as error:
        print(f"bench_hf.py: cannot import {error.name}", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("bench_hf.py: torch sees no CUDA device", file=sys.stderr)
        return 2
    if args.check:
        print(f"torch {torch.__version__}, transformers {transformers.__version__}, "
              f"{torch.cuda.get_device_name(0)}")
        return 0
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(smollm2_config(transformers))
    model = model.to(device="cuda", dtype=torch.float16).eval()
    for batch in [int(b) for b in args.batch.split(",")]:
        prompt = torch.randint(0, 49152, (batch, args.prefill_tokens), device="cuda")
        mask = torch.ones_like(prompt)
        generate = dict(attention_mask=mask, do_sample=False, pad_token_id=0,
                        max_new_tokens=args.decode_tokens, min_new_tokens=args.decode_tokens)
        with torch.inference_mode():
            model.generate(prompt, **dict(generate, max_new_tokens=4, min_new_tokens=4))  # warm
            prefill, decode = [], []
            for _ in range(args.repeats):
                p, _ = timed(torch, lambda: model(prompt, attention_mask=mask, use_cache=True))
                total, _ = timed(torch, lambda: model.generate(prompt, **generate))
                prefill.append(p)
                decode.append(max(total - p, 1e-9))
        prefill_s, decode_s = min(prefill), min(decode)
        print(json.dumps({
            "engine": "hf-transformers", "weights": "random (SmolLM2-135M shapes), float16",
            "gpu": torch.cuda.get_device_name(0), "batch": batch,
            "prefill_tokens": args.prefill_tokens, "decode_tokens": args.decode_tokens,
            "prefill_s": round(prefill_s, 5), "decode_s": round(decode_s, 5),
            "decode_tok_s": round(batch * args.decode_tokens / decode_s, 1)}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
