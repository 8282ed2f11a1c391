#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz_* programs (tests/fuzz/<program>/) from the repository's
own test inputs and a few hand-written cases. The output is committed; run this again after
changing it (it only adds and overwrites seed-*.bin files)."""
import glob
import json
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def write(target, name, data):
    os.makedirs(os.path.join(HERE, target), exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(HERE, target, "seed-" + name + ".bin"), "wb") as f:
        f.write(data)


def pack(o):
    """A minimal msgpack encoder: what vLLM's event batches use."""
    if o is None:
        return b"\xc0"
    if o is True:
        return b"\xc3"
    if o is False:
        return b"\xc2"
    if isinstance(o, int):
        if 0 <= o < 128:
            return bytes([o])
        if -32 <= o < 0:
            return struct.pack("b", o)
        if o >= 0:
            return b"\xcf" + struct.pack(">Q", o)
        return b"\xd3" + struct.pack(">q", o)
    if isinstance(o, float):
        return b"\xcb" + struct.pack(">d", o)
    if isinstance(o, bytes):
        return b"\xc4" + bytes([len(o)]) + o
    if isinstance(o, str):
        b = o.encode()
        return (bytes([0xA0 | len(b)]) if len(b) < 32 else b"\xd9" + bytes([len(b)])) + b
    if isinstance(o, list):
        return bytes([0x90 | len(o)]) + b"".join(pack(x) for x in o)
    if isinstance(o, dict):
        return bytes([0x80 | len(o)]) + b"".join(pack(k) + pack(v) for k, v in o.items())
    raise TypeError(o)


# fuzz_json: the RFC 8785 vectors and a few shapes of our own.
for path in sorted(glob.glob(os.path.join(ROOT, "data/jcs/input/*"))):
    write("fuzz_json", "jcs-" + os.path.basename(path), open(path, "rb").read())
for i, text in enumerate([
        '{"a":[1,2.5e-7,-0,1e21,123456789012345678901234],"b":{"\\u00e9":"\\ud83d\\ude00"}}',
        '[null,true,false,"\\u0000\\n\\"",{},[]]',
        '{"z":1,"a":{"y":[{"b":2,"a":1}]},"\\u20ac":0.1}',
        '"\\ud800"', '1e400', '[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]']):
    write("fuzz_json", "case%d" % i, text)
# A streamed chat chunk of the plain kind (parse_plain_chat_chunk), and one with a tool call.
write("fuzz_json", "chat-chunk",
      '{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1796559598,'
      '"model":"builtin:tiny","choices":[{"index":0,"delta":{"content":"L\\"q\\n"},'
      '"logprobs":null,"finish_reason":null,"stop_reason":null}]}')
write("fuzz_json", "chat-chunk-tool",
      '{"id":"c","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1",'
      '"function":{"name":"f","arguments":"{\\"a\\":1}"}}]},"finish_reason":null}],'
      '"usage":null}')

# fuzz_tokenizer: text of several scripts, code, numbers and special-token spellings.
for i, text in enumerate([
        "Hello, world! The quick brown fox jumps over the lazy dog.",
        "  leading spaces\n\n\ttabs and\r\nCRLF  ",
        "héllo wörld — ½ ∑ 😀👍🏽 日本語のテキスト 한국어 العربية",
        "def f(x):\n    return x ** 2  # 12345 3.14159\n",
        "<|im_start|>user\nhi<|im_end|><|endoftext|><|im_start|",
        "e\u0301 A\u030a \ufb01 \u2581word",
        "1234567890 000 9999999999999"]):
    write("fuzz_tokenizer", "text%d" % i, text)

# fuzz_jinja: the tiny models' templates and the grammar's corners, some with a context.
for name in ("tiny-chatml", "tiny-dated"):
    cfg = json.load(open(os.path.join(ROOT, "tests/data/models", name, "tokenizer_config.json")))
    write("fuzz_jinja", name, cfg["chat_template"])
templates = [
    "{% for message in messages %}{% if loop.first and message['role'] == 'system' %}"
    "{{ message['content'] | trim }}{% elif message.role == 'user' %}[INST] {{ message.content }}"
    " [/INST]{% else %}{{ message.content ~ eos_token }}{% endif %}{% endfor %}",
    "{%- set ns = namespace(found=false, idx=0) -%}{%- for m in messages[::-1] %}{%- set i = "
    "(messages|length - 1) - loop.index0 %}{%- if ns.found == false and m.role == 'user' %}"
    "{%- set ns.found = true %}{%- set ns.idx = i %}{%- endif %}{%- endfor %}{{ ns.idx }}",
    "{% macro render(t, depth=0) %}{% if t is mapping %}{% for k, v in t.items() %}{{ k }}:"
    "{{ render(v, depth + 1) }},{% endfor %}{% elif t is string %}{{ t|tojson }}{% else %}"
    "{{ t }}{% endif %}{% endmacro %}{% for tool in tools or [] %}{{ render(tool) }}{% endfor %}",
    "{{ bos_token }}{% if tools %}{{ tools|tojson(indent=2) }}{% endif %}{% for m in messages "
    "if m.role != 'tool' %}{{ '<|' ~ m.role ~ '|>' }}{{ m.content.split('</think>')[-1]|trim }}"
    "{% if not loop.last %}\n{% endif %}{% endfor %}{% if add_generation_prompt %}<|assistant|>"
    "{% endif %}",
    "{% set x %}{% filter upper %}{{ 'a' * 3 }}{% endfilter %}{% endset %}{{ x|replace('A', 'b') }}"
    "{% call(n) range(2)|list %}{% endcall %}",
    "{{ strftime_now('%d %b %Y') }}{{ raise_exception('no') if messages|length > 9 }}"
    "{{ '%s-%d'|format('a', 3) }}{{ [3,1,2]|sort|join(',') }}{{ {'b':1,'a':2}|dictsort }}"
    "{{ 'abc'[1:] }}{{ 7 // 2 }}{{ 2 ** 10 }}{{ 'x' in 'xyz' }}{{ none is none }}",
]
for i, t in enumerate(templates):
    write("fuzz_jinja", "template%d" % i, t)
write("fuzz_jinja", "with-context",
      "{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}{{ extra }}\0"
      '{"messages":[{"role":"user","content":"a"}],"extra":[1,{"k":"v"},null,2.5]}')

# fuzz_kv_events: first byte even = a msgpack payload, odd = JSON lines.
stored_array = ["BlockStored", [1, 2, -3], None, [1, 2, 3, 4, 5, 6, 7, 8], 4, None, "GPU"]
write("fuzz_kv_events", "array-form",
      b"\x00" + pack([1.5, [stored_array, ["BlockRemoved", [2], "cpu"], ["AllBlocksCleared"]], 0]))
write("fuzz_kv_events", "map-form", b"\x00" + pack({
    "ts": 2.0, "events": [
        {"type": "BlockStored", "block_hashes": [b"\x01" * 32], "parent_block_hash": 7,
         "token_ids": [1, 2, 3, 4], "block_size": 4, "lora_id": None, "medium": "GPU",
         "lora_name": None, "extra_keys": [["salt"]], "group_idx": 0},
        {"type": "BlockRemoved", "block_hashes": [9, 10], "medium": "CPU"},
        {"type": "Unknown"}], "data_parallel_rank": 1}))
write("fuzz_kv_events", "sglang", b"\x00" + pack(
    [3.0, [["BlockStored", [5], 4, [9, 9], 2, None, None, {"cache_salt": "s"}]]]))
write("fuzz_kv_events", "engine-lines", b"\x01" + "\n".join([
    '{"type":"snapshot","seq":1,"blocks":[{"hash":"9f3a"},{"hash":"ffffffffffffffff"}]}',
    '{"type":"stored","seq":2,"hash":"1a"}', '{"type":"removed","seq":3,"hash":"zz"}',
    '{"type":"cleared","seq":4}',
    '{"type":"load","running":2,"waiting":1e300,"kv_pages_used":-1,"kv_pages_total":64}',
    '{"type":"other","seq":5}', 'not json']).encode())
write("fuzz_kv_events", "engine-runs", b"\x01" + "\n".join([
    '{"type":"stored","seq":6,"hashes":["00000000000000a1","00000000000000a2"],'
    '"parent":"00000000000000a0","salt":""}',
    '{"type":"removed","seq":8,"hashes":["00000000000000a1","zz"],"salt":"t"}',
    '{"type":"removed","seq":10,"hashes":[],"salt":""}',
    '{"type":"stored","seq":10,"hashes":"00000000000000a1","hash":"1"}']).encode())

# fuzz_config: the example configurations and the README's.
for path in sorted(glob.glob(os.path.join(ROOT, "examples/*.yaml"))):
    write("fuzz_config", os.path.basename(path), open(path, "rb").read())
write("fuzz_config", "full", """listen: 127.0.0.1:8080
threads: 2
policy: cache_aware
upstreams:
  - url: http://127.0.0.1:9001
  - {url: "http://10.0.0.5:8000", kind: vllm, kv_events: "tcp://10.0.0.5:5557", data_parallel_size: 2}
models:
  - {name: qwen3, tokenizer: byte, block_size: 32, template_errors: route_on_text}
canonicalization: {tool_json: rewrite, timestamp: observe, timestamp_granularity_s: 60}
timeouts: {connect_ms: 100, first_byte_ms: 1000}
limits: {max_body_bytes: 1024, max_connections: 10}
api_keys:
  - sk-a
  - {key: sk-b, tenant: team-b, isolate: true}
tenant_header: x-tenant
admin_key: admin-0123456789abcdef
admin_listen: "[::1]:9090"
""")

# fuzz_request_prep: first byte = API (0 chat, 1 completions, 2 messages, 3 responses) + 4/8
# for a tenant and its isolation.
for case in json.load(open(os.path.join(ROOT, "tests/canonicalize/data/chat_requests.json"))):
    write("fuzz_request_prep", "chat-" + case["name"], b"\x0c" + json.dumps(case["body"]).encode())
write("fuzz_request_prep", "chatml", b"\x00" + json.dumps({
    "model": "chatml", "stream": True, "messages": [
        {"role": "system", "content": "It is 2024-07-26T12:00:00Z."},
        {"role": "user", "content": [{"type": "text", "text": "hi"}]}]}).encode())
write("fuzz_request_prep", "completions", b"\x01" + json.dumps(
    {"model": "m", "prompt": "Once upon a time", "max_tokens": 5}).encode())
write("fuzz_request_prep", "messages", b"\x02" + json.dumps({
    "model": "m", "max_tokens": 16, "system": [{"type": "text", "text": "sys",
                                               "cache_control": {"type": "ephemeral"}}],
    "messages": [{"role": "user", "content": "hello"}],
    "tools": [{"name": "f", "input_schema": {"type": "object"}}]}).encode())
write("fuzz_request_prep", "responses", b"\x03" + json.dumps({
    "model": "m", "instructions": "be brief", "input": [
        {"role": "user", "content": [{"type": "input_text", "text": "hi"}]}]}).encode())

# fuzz_http: raw requests, well-formed and not.
body = '{"messages":[{"role":"user","content":"hi"}]}'
for name, raw in {
    "get-health": "GET /health HTTP/1.1\r\nHost: x\r\n\r\n",
    "post-chat": "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json"
                 "\r\nx-tenant: a\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body),
    "chunked": "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
               "%x\r\n%s\r\n0\r\n\r\n" % (len(body), body),
    "pipelined": "GET /health HTTP/1.1\r\nHost: x\r\n\r\nGET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n"
                 "GET /stats HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    "smuggle-cl-te": "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n"
                     "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /metrics HTTP/1.1\r\n\r\n",
    "two-cl": "POST /v1/completions HTTP/1.1\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}",
    "folding": "GET /health HTTP/1.1\r\nHost: x\r\nX-A: a\r\n  folded\r\n\r\n",
    "bad-chunk": "POST /v1/messages HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n",
    "http10": "GET /metrics HTTP/1.0\r\n\r\n",
    "responses": "POST /v1/responses HTTP/1.1\r\nContent-Length: 13\r\n\r\n{\"input\":\"x\"}",
    "expect-continue": "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
                       "Content-Length: %d\r\n\r\n%s" % (len(body), body),
    "chunked-ext-trailer": "POST /v1/chat/completions HTTP/1.1\r\nTransfer-Encoding: chunked\r\n"
                           "\r\n%x;a=\"b\"\r\n%s\r\n0\r\nx-t: 1\r\n\r\n" % (len(body), body),
}.items():
    write("fuzz_http", name, raw)

# fuzz_peer_datagram: a peer gateway's datagrams (gateway/include/prefixgate/gateway/peer_sends.h),
# replicas keyed 0-3 as the fuzz program lists them.
import struct


def peer_datagram(origin, records):
    out = b"PGPS" + struct.pack("<BQ", 1, origin)
    for kind, flight, routed in records:
        out += struct.pack("<BQ", kind, flight)
        if kind == 1:
            replica, prompt, cached, block, hashes = routed
            out += struct.pack("<QIIII", replica, prompt, cached, block, len(hashes))
            out += b"".join(struct.pack("<Q", h) for h in hashes)
    return out


write("fuzz_peer_datagram", "heartbeat", peer_datagram(7, []))
write("fuzz_peer_datagram", "lifecycle", peer_datagram(7, [
    (1, 1, (2, 160, 48, 16, list(range(100, 110)))), (2, 1, None), (3, 1, None)]))
write("fuzz_peer_datagram", "burst", peer_datagram(9, [
    (1, f, (f % 5, 64 * f, 16, 16, [1000 + f, 2000 + f])) for f in range(1, 9)]
    + [(3, f, None) for f in range(1, 9, 2)]))

# fuzz_chunked_body: an upstream answer's chunked body (what follows its header).
for name, raw in {
    "events": "".join("%x\r\n%s\r\n" % (len(e), e) for e in
                      ["data: {\"choices\":[]}\n\n", "data: [DONE]\n\n"]) + "0\r\n\r\n",
    "ext-trailer": "5;name=\"v\"\r\nhello\r\n0\r\nx-trailer: 1\r\n\r\n",
    "upper-hex": "00A\r\n0123456789\r\n0\r\n\r\n",
    "bare-lf": "5\nhello\r\n0\r\n\r\n",
    "next-answer": "2\r\n{}\r\n0\r\n\r\nHTTP/1.1 200 OK\r\n",
}.items():
    write("fuzz_chunked_body", name, raw)
