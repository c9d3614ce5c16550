#!/usr/bin/env python3
"""llama-bench's JSON output -> the GPU routine's results lines (tools/bench_results.h).

  llama-bench -m M.gguf -p 1,2,3,5,8,9,16,512 -n 128 -fa 1 -o json > lb.json
  python3 tools/llama_bench_results.py lb.json --shape llama-3.2-1b-q4_0 \
      --command "llama-bench -m M.gguf -p 1,2,3,5,8,9,16,512 -n 128 -fa 1 -o json" \
      >> bench/results/gpu/2026-11-27-nvidia-h200.jsonl

One line per (engine, shape, measure), the same fields and key order as splitspec's
own writer: engine "llama.cpp", gpu (llama-bench's gpu_info), shape (--shape, else the
model file's name without ".gguf"), measure, value, command (--command: the llama-bench
command line that produced the file). Measures, from llama-bench's records:
  decode_b1    tok/s of a text-generation test (n_prompt 0, n_gen > 0)
  prefill_N    tok/s of a prompt test of N tokens (n_gen 0), for N > 16
  verify_kK    T(K) / T(1) for prompt tests of K = 2..16 tokens: K / avg_ts(K) over
               1 / avg_ts(1), so a pp1 record is needed (llama.cpp's verify curve)
Errors (exit 1, naming the record or field): not a JSON list, a record without the
fields above, records of more than one model or GPU, verify sizes without pp1.

llama-bench's default markdown table (`-o md`, the format of a log) is read with
--markdown --gpu NAME (the table names no GPU): each row "| model | ... | test | t/s |"
whose test is ppN or tgN gives a record (t/s: the mean before the "±").
"""
import re
import argparse
import json
import os
import sys


class ConversionError(Exception):
    pass


def result_line(engine, gpu, shape, measure, value, command):
    """One results line, keys in bench_results.h's order."""
    fields = [("engine", engine), ("gpu", gpu), ("shape", shape), ("measure", measure),
              ("value", value), ("command", command)]
    for name, v in fields:
        if v is None or v == "":
            raise ConversionError(f"field '{name}' is empty (measure '{measure}')")
    return json.dumps(dict(fields), separators=(",", ":"), ensure_ascii=False)


def shape_label(model_filename):
    name = os.path.basename(model_filename)
    return name[:-len(".gguf")] if name.endswith(".gguf") and len(name) > 5 else name


def convert(records, shape, command):
    """llama-bench records -> results lines (strings), in a fixed order."""
    if not isinstance(records, list) or not records:
        raise ConversionError("llama-bench output: expected a non-empty JSON list of records")
    for i, r in enumerate(records):
        for key in ("model_filename", "gpu_info", "n_prompt", "n_gen", "avg_ts"):
            if not isinstance(r, dict) or key not in r:
                raise ConversionError(f"llama-bench record {i}: no field '{key}'")
    for key in ("model_filename", "gpu_info"):
        values = sorted({r[key] for r in records})
        if len(values) != 1:
            raise ConversionError(f"llama-bench records of several {key}: {values}")
    gpu = records[0]["gpu_info"]
    shape = shape or shape_label(records[0]["model_filename"])
    prompt_ts = {}
    lines = []
    for r in records:
        if r["n_prompt"] == 0 and r["n_gen"] > 0:
            lines.append(result_line("llama.cpp", gpu, shape, "decode_b1", r["avg_ts"], command))
        elif r["n_gen"] == 0 and r["n_prompt"] > 0:
            prompt_ts[r["n_prompt"]] = r["avg_ts"]
    for n in sorted(prompt_ts):
        if n > 16:
            lines.append(result_line("llama.cpp", gpu, shape, f"prefill_{n}", prompt_ts[n], command))
    verify = [k for k in sorted(prompt_ts) if 2 <= k <= 16]
    if verify and 1 not in prompt_ts:
        raise ConversionError(f"prompt tests of {verify} tokens need a 1-token one (add -p 1)")
    for k in verify:
        ratio = (k / prompt_ts[k]) / (1 / prompt_ts[1])
        lines.append(result_line("llama.cpp", gpu, shape, f"verify_k{k}", ratio, command))
    return lines


def markdown_records(text, gpu, model_filename):
    """llama-bench -o md rows -> records with the JSON output's fields."""
    records = []
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 3 or not line.lstrip().startswith("|"):
            continue
        test, ts = cells[-2], cells[-1]
        m = re.fullmatch(r"(pp|tg)(\d+)", test)
        v = re.match(r"([0-9.]+)", ts)
        if not m or not v:
            continue
        n = int(m.group(2))
        records.append({"model_filename": model_filename, "gpu_info": gpu,
                        "n_prompt": n if m.group(1) == "pp" else 0,
                        "n_gen": n if m.group(1) == "tg" else 0, "avg_ts": float(v.group(1))})
    return records


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("json_file", help="llama-bench -o json output (-o md with --markdown)")
    parser.add_argument("--markdown", action="store_true", help="the file is llama-bench's md table")
    parser.add_argument("--gpu", default="", help="with --markdown: the GPU's name")
    parser.add_argument("--shape", default="", help="the shape label (default: the model file)")
    parser.add_argument("--command", required=True, help="the llama-bench command line")
    args = parser.parse_args()
    try:
        with open(args.json_file, encoding="utf-8") as f:
            if args.markdown:
                if not args.gpu:
                    raise ConversionError("--markdown needs --gpu NAME (the table names none)")
                records = markdown_records(f.read(), args.gpu, args.shape or args.json_file)
            else:
                records = json.load(f)
        for line in convert(records, args.shape, args.command):
            print(line)
    except (OSError, json.JSONDecodeError, ConversionError) as e:
        print(f"llama_bench_results: {args.json_file}: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
