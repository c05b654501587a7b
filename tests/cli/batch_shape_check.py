#!/usr/bin/env python3
"""Check a `kara batch` output against its input and the OpenAI Batch API's
documented output format (used by test_batch_openai_shape.sh).

  batch_shape_check.py INPUT OUTPUT [--ordered] [--prefix] [--errors N]

Every output line must be
  {"id": str, "custom_id": str, "response": {"status_code": 200, "request_id": str,
   "body": {...}}, "error": null}
or, for a failed request,
  {"id": str, "custom_id": str|null, "response": null, "error": {"code": str, "message": str}}
plus, optionally, the one extra top-level field Kara adds (clients of the
Batch API ignore fields they do not know): "kara_request_hash", 16 lower-case
hex digits, which must match the input: the 64-bit FNV-1a of the request's
canonical JSON text (keys sorted, no blanks, numbers by value; see
canonical() below) xor the FNV-1a of "~", or for a line that does not parse
the FNV-1a of its bytes (surrounding blanks left out).
where the body is a chat.completion for /v1/chat/completions (and the plain
{"id","prompt"} form) and a text_completion for /v1/completions. Every input
request must be answered exactly once (--prefix: at most once, the lines so
far being a prefix of the input order - what an --ordered job killed midway
leaves); --ordered: in input order; --errors N: exactly N error lines.
"""
import json
import sys


def fail(msg):
    print("batch_shape_check: " + msg)
    sys.exit(1)


def is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def is_str(v):
    return isinstance(v, str)


HASH_KEY = "kara_request_hash"


def fnv1a64(data):
    h = 0xCBF29CE484222325
    for b in data:
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def canon_str(s):
    out = ['"']
    for ch in s:
        c = ord(ch)
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch in "\n\r\t\b\f":
            out.append({"\n": "\\n", "\r": "\\r", "\t": "\\t", "\b": "\\b", "\f": "\\f"}[ch])
        elif c < 0x20 or c == 0x7F:
            out.append("\\u%04x" % c)
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def canonical(v):
    """The text Kara hashes a parsed request on (tools/common/json_canon.h),
    written here independently of the C code."""
    if v is None:
        return "null"
    if v is True or v is False:
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        x = float(v) if isinstance(v, float) or abs(v) >= 2**53 else v
        if isinstance(x, int):
            return "%d" % x
        if x == int(x) and abs(x) < 2**53:
            return "%d" % int(x)
        return "%.17g" % x
    if isinstance(v, str):
        return canon_str(v)
    if isinstance(v, list):
        return "[" + ",".join(canonical(m) for m in v) + "]"
    keys = sorted(v, key=lambda k: k.encode("utf-8"))
    return "{" + ",".join(canon_str(k) + ":" + canonical(v[k]) for k in keys) + "}"


def strict_pairs(pairs):
    d = {}
    for k, v in pairs:
        if k in d:
            raise ValueError("duplicate key")
        d[k] = v
    return d


def no_constant(name):
    raise ValueError(name)


def request_hash(rawline):
    try:
        obj = json.loads(rawline, object_pairs_hook=strict_pairs, parse_constant=no_constant)
    except ValueError:
        return fnv1a64(rawline.strip(b" \t\r"))
    return fnv1a64(canonical(obj).encode("utf-8")) ^ fnv1a64(b"~")


def input_requests(path, hashes):
    """(key, endpoint) per request in input order; key is the custom_id, or
    ("line", N) for a line whose custom_id cannot be read. hashes gets each
    key's request hash."""
    reqs = []
    with open(path, "rb") as f:
        raw = f.read().split(b"\n")
    if raw and raw[-1] == b"":
        raw.pop()
    for no, rawline in enumerate(raw, 1):
        line = rawline.decode("utf-8", "replace")
        if not line.strip():
            continue
        key, url = ("line", no), "/v1/chat/completions"
        try:
            obj = json.loads(line)
        except ValueError:
            obj = None
        if isinstance(obj, dict):
            plain = "custom_id" not in obj and "prompt" in obj
            cid = obj.get("id" if plain else "custom_id")
            if is_str(cid) and cid:
                key = cid
            if not plain and is_str(obj.get("url")):
                url = obj["url"]
        reqs.append((key, url))
        hashes[key] = "%016x" % request_hash(rawline)
    return reqs


def check_ok(where, r, url):
    resp = r["response"]
    if not isinstance(resp, dict):
        fail(f"{where}: response must be an object when error is null")
    if resp.get("status_code") != 200 or not is_int(resp.get("status_code")):
        fail(f"{where}: response.status_code must be the integer 200")
    if not is_str(resp.get("request_id")) or not resp["request_id"]:
        fail(f"{where}: response.request_id must be a non-empty string")
    body = resp.get("body")
    if not isinstance(body, dict):
        fail(f"{where}: response.body must be an object")
    completion = url == "/v1/completions"
    want = "text_completion" if completion else "chat.completion"
    if body.get("object") != want:
        fail(f"{where}: body.object is {body.get('object')!r}, want {want!r} for {url}")
    prefix = "cmpl-" if completion else "chatcmpl-"
    if not is_str(body.get("id")) or not body["id"].startswith(prefix):
        fail(f"{where}: body.id must be a string starting with {prefix}")
    if not is_int(body.get("created")) or body["created"] <= 0:
        fail(f"{where}: body.created must be a positive integer (unix seconds)")
    if not is_str(body.get("model")) or not body["model"]:
        fail(f"{where}: body.model must be a non-empty string")
    choices = body.get("choices")
    if not isinstance(choices, list) or len(choices) != 1:
        fail(f"{where}: body.choices must be a list of one choice")
    c = choices[0]
    if not isinstance(c, dict) or c.get("index") != 0 or not is_int(c.get("index")):
        fail(f"{where}: choices[0].index must be the integer 0")
    if c.get("finish_reason") not in ("stop", "length"):
        fail(f"{where}: choices[0].finish_reason must be \"stop\" or \"length\", got {c.get('finish_reason')!r}")
    if "logprobs" not in c or c["logprobs"] is not None:
        fail(f"{where}: choices[0].logprobs must be present and null")
    if completion:
        if not is_str(c.get("text")):
            fail(f"{where}: choices[0].text must be a string for /v1/completions")
        if "message" in c:
            fail(f"{where}: a text_completion choice has no message")
    else:
        m = c.get("message")
        if not isinstance(m, dict) or m.get("role") != "assistant" or not is_str(m.get("content")):
            fail(f"{where}: choices[0].message must be {{role: \"assistant\", content: string}}")
        if m.get("reasoning_content") is not None and not is_str(m["reasoning_content"]):
            fail(f"{where}: message.reasoning_content must be a string or null")
        if "text" in c:
            fail(f"{where}: a chat.completion choice has no text")
    u = body.get("usage")
    if not isinstance(u, dict) or not all(is_int(u.get(k)) for k in ("prompt_tokens", "completion_tokens",
                                                                      "total_tokens")):
        fail(f"{where}: usage needs integer prompt_tokens, completion_tokens and total_tokens")
    if u["total_tokens"] != u["prompt_tokens"] + u["completion_tokens"] or u["prompt_tokens"] < 1:
        fail(f"{where}: usage.total_tokens must be prompt_tokens + completion_tokens (and prompt_tokens >= 1)")


def check_error(where, r):
    if r["response"] is not None:
        fail(f"{where}: a failed request has response null")
    e = r["error"]
    if not isinstance(e, dict) or not is_str(e.get("code")) or not e["code"] or not is_str(e.get("message")):
        fail(f"{where}: error must be {{code: string, message: string}}")
    if not e["message"].startswith("input line "):
        fail(f"{where}: the error message must name the input line: {e['message']!r}")


def main():
    args = sys.argv[1:]
    ordered, prefix, errors = "--ordered" in args, "--prefix" in args, None
    if "--errors" in args:
        errors = int(args[args.index("--errors") + 1])
    paths = [a for i, a in enumerate(args) if not a.startswith("--") and (i == 0 or args[i - 1] != "--errors")]
    hashes = {}
    reqs = input_requests(paths[0], hashes)
    url_of = dict(reqs)
    order = [k for k, _ in reqs]
    got, n_err = [], 0
    with open(paths[1], "rb") as f:
        data = f.read().decode("utf-8")
    if prefix and data and not data.endswith("\n"):
        data = data[: data.rfind("\n") + 1]  # a torn last line is redone on resume
    if data and not data.endswith("\n"):
        fail("the output does not end with a newline")
    for no, line in enumerate(data.splitlines(), 1):
        where = f"output line {no}"
        try:
            r = json.loads(line)
        except ValueError as e:
            fail(f"{where}: not JSON: {e}")
        if not isinstance(r, dict) or set(r) - {HASH_KEY} != {"id", "custom_id", "response", "error"}:
            fail(f"{where}: want exactly the keys id, custom_id, response, error (and {HASH_KEY})")
        if not is_str(r["id"]) or not r["id"].startswith("batch_req_"):
            fail(f"{where}: id must be a string starting with batch_req_")
        if r["error"] is None:
            if not is_str(r["custom_id"]):
                fail(f"{where}: custom_id must be a string")
            if r["custom_id"] not in url_of:
                fail(f"{where}: custom_id {r['custom_id']!r} is not in the input")
            check_ok(where, r, url_of[r["custom_id"]])
            key = r["custom_id"]
        else:
            check_error(where, r)
            n_err += 1
            if r["custom_id"] is None:
                key = ("line", r["error"].get("line"))
            elif is_str(r["custom_id"]):
                key = r["custom_id"]
            else:
                fail(f"{where}: custom_id must be a string or null")
            if key not in url_of:
                fail(f"{where}: {key!r} is not a request of the input")
        if HASH_KEY in r and r[HASH_KEY] != hashes.get(key):
            fail(f"{where}: {HASH_KEY} {r[HASH_KEY]!r} is not the hash of {key!r}'s input line ({hashes.get(key)})")
        got.append(key)
    if len(set(got)) != len(got):
        dup = sorted({str(k) for k in got if got.count(k) > 1})
        fail(f"answered more than once: {', '.join(dup[:5])}")
    if prefix:
        if got != order[: len(got)]:
            fail(f"the {len(got)} lines are not the input's first {len(got)} requests in order")
    else:
        if set(got) != set(order):
            missing = [str(k) for k in order if k not in set(got)]
            fail(f"{len(missing)} requests unanswered: {', '.join(missing[:5])}")
        if ordered and got != order:
            first = next(i for i in range(len(got)) if got[i] != order[i])
            fail(f"not in input order: output line {first + 1} answers {got[first]!r}, want {order[first]!r}")
        if errors is not None and n_err != errors:
            fail(f"{n_err} error lines, want {errors}")
    print(f"batch_shape_check: {len(got)} lines ok ({n_err} errors)")


main()
