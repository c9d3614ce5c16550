#!/usr/bin/env python3
"""Writes the seed inputs of the fuzz targets to tests/fuzz/corpus/<target>/seed-*.

Run it after changing a seed here; the files it writes are committed. Inputs that
a fuzzer found a bug with are committed beside them as regress-* (never rewritten).
Wire frames are protobuf-encoded by hand (no protobuf module needed).
"""

import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


def write(target, seeds):
    folder = os.path.join(HERE, "corpus", target)
    os.makedirs(folder, exist_ok=True)
    for name in os.listdir(folder):
        if name.startswith("seed-"):
            os.remove(os.path.join(folder, name))
    for i, data in enumerate(seeds):
        with open(os.path.join(folder, "seed-%02d" % i), "wb") as out:
            out.write(data)


# ---- HTTP: the first byte picks the piece size the stream is fed in ----------
TE = b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
HTTP = [
    b"GET / HTTP/1.1\r\nHost: h\r\n\r\n",
    b"GET /v1/models?x=1 HTTP/1.1\r\nHost: localhost\r\nX-Test:  padded \t\r\n\r\n",
    b"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
    b"POST /v1/completions HTTP/1.1\r\nHost: h\r\nContent-Length: 11\r\n\r\n{\"a\":\"bc\"}X",
    TE + b"5;a=b\r\nhello\r\n6 ; q=\"x;y\\\"\"\r\n world\r\n0\r\nT: v\r\n\r\n",
    TE + b"00005\r\nhello\r\n000;e\r\n\r\n",
    b"POST /a HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\n\r\nhi"
    b"GET /b HTTP/1.1\r\nHost: h\r\n\r\n" + TE + b"1\r\nx\r\n0\r\n\r\n",
    b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 6\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nX",
    b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\r\n\r\n0\r\n\r\n",
    b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: \x0bchunked\r\n\r\n0\r\n\r\n",
    b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: x\r\n chunked\r\n\r\n",
    b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\nA",
    TE + b"5\nhello\r\n0\r\n\r\n",
    TE + b"5;a=\"open\r\nhello\r\n0\r\n\r\n",
    TE + b"fffffffffffffffff1\r\n",
]
write("http_parser", [bytes([piece]) + request for piece, request in
                      zip([0, 6, 1, 63, 2, 10, 3, 0, 4, 5, 7, 8, 9, 11, 12], HTTP)])

# ---- OpenAI request bodies -----------------------------------------------------
write("openai_request", [
    b'{"model":"m","prompt":"Hello","max_tokens":8,"temperature":0}',
    b'{"prompt":[1,2,3],"max_tokens":4,"stream":true,"stream_options":{"include_usage":true}}',
    b'{"model":"m","messages":[{"role":"system","content":"be brief"},'
    b'{"role":"user","content":[{"type":"text","text":"hi \\u00e9\\ud83d\\ude00"}]}],'
    b'"top_p":0.9,"top_k":40,"min_p":0.05,"seed":18446744073709551615,"stop":["\\n","END"]}',
    b'{"prompt":"x","guidance_scale":1.5,"negative_prompt":"y","drafter":"none","echo":true}',
    b'{"messages":[{"role":"developer","content":null}],"n":1,"logprobs":false,"best_of":1}',
    b'[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]',
    b'{"prompt":"a","max_tokens":1e400,"temperature":-0.0,"x":[1,]}',
    b'{"prompt":"\xc0\xaf","model":"\xed\xa0\x80"}',
    # Tools: definitions, every tool_choice form, and a history with calls and results.
    b'{"messages":[{"role":"user","content":"w?"},{"role":"assistant","content":null,"tool_calls":'
    b'[{"id":"c1","type":"function","function":{"name":"w","arguments":"{\\"c\\": 1}"}}]},'
    b'{"role":"tool","tool_call_id":"c1","content":"18C"}],"tools":[{"type":"function","function":'
    b'{"name":"w","description":"d","parameters":{"type":"object","properties":{"c":{"type":"integer"}}}}}],'
    b'"tool_choice":{"type":"function","function":{"name":"w"}},"parallel_tool_calls":false}',
    b'{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"a"}},'
    b'{"type":"function","function":{"name":"b","parameters":null}}],"tool_choice":"required"}',
])

# ---- TOML: the shipped configs and the corners of the grammar -------------------
toml = []
for path in ("deploy/cluster.toml", "deploy/examples/tp2_cpu.toml",
             "deploy/examples/multi_host_gpu.toml"):
    with open(os.path.join(HERE, "..", "..", path), "rb") as source:
        toml.append(source.read())
toml += [
    b'a = "x\\u00e9\\U0001F600\\t"\nb = \'lit\'\nc = -1_000\nd = 1.5e-3\ne = [1, [2, "3"], ]\n'
    b'f = inf\ng = nan\nh = true\n"quoted key" = 0\n[t.u]\nk = 1\n[[arr]]\nx = 1\n[[arr]]\nx = 2\n',
    b'[a]\n[a]\n', b'a.b = 1\n', b'x = {y = 1}\n', b'x = """multi"""\n', b'x = 0x10\n',
    b'x = 9223372036854775808\n', b'x = [\n  1,\n  # comment\n  2\n]\n',
]
write("toml_parser", toml)

# ---- wire frames: "SPSF" + protobuf Envelope, "SPKV" rendezvous frames ---------


def varint(n):
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def field(number, wire_type, payload):
    tag = varint(number << 3 | wire_type)
    if wire_type == 0:
        return tag + varint(payload)
    if wire_type == 5:
        return tag + struct.pack("<f", payload)
    return tag + varint(len(payload)) + payload  # wire type 2


def envelope(body_field, body, version=1):
    return b"SPSF" + field(1, 0, version) + field(body_field, 2, body)


params = field(1, 5, 0.7) + field(2, 0, 40) + field(3, 5, 0.9) + field(5, 0, 42) + \
    field(6, 0, 16) + field(7, 2, b"END") + field(9, 5, 1.5)
sparse = field(1, 2, varint(5) + varint(7)) + field(2, 2, struct.pack("<ff", 0.25, 0.75))
draft_block = field(1, 2, b"req-1") + field(2, 0, 3) + field(3, 0, 10) + \
    field(4, 2, varint(5) + varint(7)) + field(5, 2, sparse) + field(5, 2, sparse)


def rendezvous(op, request_id, wait_ms, key, value):
    return b"SPKV" + bytes([op]) + struct.pack("<Qq", request_id, wait_ms) + \
        struct.pack("<I", len(key)) + key + struct.pack("<I", len(value)) + value


write("wire_message", [
    envelope(12, field(1, 0, 7) + field(2, 0, 1)),  # heartbeat
    envelope(21, field(1, 2, b"req-1") + field(8, 2, params)),  # assignment
    envelope(20, field(3, 2, params)),  # submit
    envelope(24, draft_block),  # draft_block
    envelope(12, b"", version=2),
    b"SPSF",
    rendezvous(1, 1, 0, b"group/0/addr", b"tcp://10.0.0.1:5555"),
    rendezvous(2, 2, 1000, b"group/0/addr", b""),
    rendezvous(6, 3, 0, b"k", b""),
])
