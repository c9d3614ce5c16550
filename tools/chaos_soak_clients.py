#!/usr/bin/env python3
"""The streaming clients of tools/chaos_soak.sh.

Usage: chaos_soak_clients.py --port P --clients N --seconds S --references FILE --out FILE
                             [--max-tokens T] [--stall-s X]

N threads stream temperature-0 completions (POST /v1/completions, "stream": true, the prompt
as token ids) one after another for S seconds, then let the ones in flight finish. Each
request ends in exactly one class:
  exact     HTTP 200, a finish_reason, [DONE], text equal to plain greedy (--references)
  error     a clear error: an HTTP error status with an OpenAI-shaped JSON error, or an SSE
            error event ({"error": {"message": ...}}) followed by [DONE]
  mismatch  finished normally, but the text differs from plain greedy
  hung      no byte for --stall-s seconds (the stream neither progressed nor ended)
  lost      the connection ended without [DONE] or an error (cut silently), or the reply
            was not the protocol (no status, bad JSON)
The references file is a JSON list of {"prompt_ids": [...], "text": "..."} (plain greedy
`splitspec generate` output). Writes the counts (and the first examples of each failure class)
to --out as JSON and prints them on one line. Loopback only: connects to 127.0.0.1.
"""

import argparse
import http.client
import json
import random
import socket
import sys
import threading
import time


def classify(port, prompt_ids, expected, max_tokens, stall_s):
    """(class, detail) of one streamed completion."""
    body = json.dumps({"prompt": prompt_ids, "max_tokens": max_tokens, "temperature": 0,
                       "stream": True})
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=stall_s)
    try:
        connection.request("POST", "/v1/completions", body,
                           {"Content-Type": "application/json"})
        response = connection.getresponse()
        if response.status != 200:
            payload = response.read().decode("utf-8", "replace")
            try:
                message = json.loads(payload)["error"]["message"]
            except (ValueError, KeyError, TypeError):
                return "lost", f"HTTP {response.status} without an OpenAI error: {payload[:200]}"
            return "error", f"HTTP {response.status}: {message}"
        text, finished, error = "", False, None
        while True:
            line = response.readline()
            if not line:
                return "lost", f"stream cut after {len(text)} characters, no [DONE]"
            line = line.decode("utf-8", "replace").strip()
            if not line.startswith("data: "):
                continue
            data = line[len("data: "):]
            if data == "[DONE]":
                break
            event = json.loads(data)
            if "error" in event:
                error = event["error"]["message"]
                continue
            choice = event["choices"][0]
            text += choice["text"]
            finished = finished or choice.get("finish_reason") is not None
        if error is not None:
            return "error", f"SSE error event: {error}"
        if not finished:
            return "lost", "[DONE] without a finish_reason"
        if text != expected:
            return "mismatch", f"{text!r} != plain greedy {expected!r}"
        return "exact", ""
    except socket.timeout:
        return "hung", f"no byte for {stall_s} s"
    except (ConnectionError, http.client.HTTPException, OSError) as e:
        return "lost", f"{type(e).__name__}: {e}"
    except (ValueError, KeyError, IndexError, TypeError) as e:
        return "lost", f"not the protocol: {type(e).__name__}: {e}"
    finally:
        connection.close()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--seconds", type=float, required=True)
    parser.add_argument("--references", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--stall-s", type=float, default=150.0)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    with open(args.references, encoding="utf-8") as f:
        references = json.load(f)
    deadline = time.monotonic() + args.seconds
    lock = threading.Lock()
    counts = {"requests": 0, "exact": 0, "error": 0, "mismatch": 0, "hung": 0, "lost": 0}
    examples = {}

    def client(index):
        rng = random.Random(args.seed * 1000 + index)
        while time.monotonic() < deadline:
            reference = rng.choice(references)
            kind, detail = classify(args.port, reference["prompt_ids"], reference["text"],
                                    args.max_tokens, args.stall_s)
            with lock:
                counts["requests"] += 1
                counts[kind] += 1
                if kind != "exact" and len(examples.setdefault(kind, [])) < 5:
                    examples[kind].append(detail)
            if kind == "error":
                time.sleep(0.2)  # a refused request (no target up) is retried, not hammered

    threads = [threading.Thread(target=client, args=(i,)) for i in range(args.clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    result = dict(counts, examples=examples)
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(result, f, indent=1)
    print(json.dumps(counts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
