#!/usr/bin/env python3
"""Check the shape of the code base (docs/ARCHITECTURE.md, "Who may call whom").

- No include cycle between files of different runtime folders: the graph of
  `#include "x.h"` between runtime/<folder>/ files, collapsed to folders, has
  no cycle.
- No folder includes a header of a folder it may not call (the table below
  mirrors runtime/CMakeLists.txt, which enforces it at build time).
- kernels_cpu/ and platform/ include nothing of the runtime; tools/ includes
  only the public header of the runtime.
- The KV methods live in runtime/kv/methods/, one file each: no library
  file outside that folder switches on a method (`case KARA_KV_METHOD_X`,
  `== KARA_KV_METHOD_X`) or names a method's own table or function
  (`kr_kvm_*`) or calls a baseline's own selection (declared in
  runtime/kv/kv_baselines.h for its unit tests), and a method file exports
  nothing else; the rest of the runtime asks a method through its table
  (runtime/kv/kv_method.h). The
  tools do not switch on a method either, but for full (the reference) and
  kara (the method under study): they ask kara_kv_method_info_get.
- No hand-written source file is longer than 800 lines (the generated
  Unicode tables are the exception). The one public header may hold 1,000:
  it is the contract of every declaration, each with its result codes, and
  splitting it would break the rule of one public header.

Prints every violation and exits 1 when there is one.
"""
import os
import re
import subprocess
import sys

MAX_LINES = 800
GENERATED = {"runtime/tokenizer/unicode_tables.c"}
LONGER = {"runtime/include/kara.h": 1000}
MAY_CALL = {
    "common": set(),
    "gguf": {"common"},
    "tokenizer": {"common", "gguf"},
    "model": {"common", "gguf", "tokenizer"},
    "kv": {"common"},
    "decode": {"common", "model", "kv"},
    "generate": {"common"},
    "chat": {"common"},
    "engine": {"common", "generate", "kv", "decode"},
    "config": {"common", "kv"},
}
# Where a folder may use only some headers of another: the engine reads a context through its accessors.
ONLY_HEADERS = {("engine", "decode"): {"context_access.h"}}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
LIBRARY = ("runtime/", "kernels_cpu/", "kernels_cuda/", "platform/")
METHODS = "runtime/kv/methods/"
# switching on a method: case X, == X, != X, X == ..., X != ...
METHOD_SWITCH = re.compile(r"\bcase\s+KARA_KV_METHOD_\w+|[=!]=\s*KARA_KV_METHOD_\w+|\bKARA_KV_METHOD_\w+\s*[=!]=")
METHOD_OWN = re.compile(r"\bkr_kvm_\w+")
BASELINES = "runtime/kv/kv_baselines.h"
DECLARED = re.compile(r"\b(kr_kv_\w+)\s*\(")
# the methods a tool may still name in a comparison: the reference and the method under study
TOOL_METHODS = {"KARA_KV_METHOD_FULL", "KARA_KV_METHOD_KARA"}
# a top-level definition that is not static: a name followed by ( or = at the start of a line's declaration
EXPORTED = re.compile(r"^(?!static\b)(?:const\s+)?[A-Za-z_][\w \t\*]*?\b([A-Za-z_]\w*)\s*(?:\(|=)", re.M)


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", " ", text)


def method_problems(root, files):
    """Methods only in their own files (runtime/kv/kv_method.h)."""
    problems = []
    # each baseline's selection: defined in its method's file, declared for it and its unit tests
    path = os.path.join(root, BASELINES)
    own = set(DECLARED.findall(strip_comments(open(path).read()))) if os.path.exists(path) else set()
    for f in files:
        if f.startswith("tools/") and f.endswith((".c", ".h")):
            text = strip_comments(open(os.path.join(root, f), errors="replace").read())
            for m in METHOD_SWITCH.finditer(text):
                if not re.search(r"KARA_KV_METHOD_\w+", m.group(0)).group(0) in TOOL_METHODS:
                    problems.append(f"{f}: switches on a KV method ({m.group(0)}): ask kara_kv_method_info_get")
            continue
        if not f.endswith((".c", ".h", ".cu")) or not f.startswith(LIBRARY) or f == "runtime/include/kara.h":
            continue
        text = strip_comments(open(os.path.join(root, f), errors="replace").read())
        if f.startswith(METHODS):
            if f.endswith("/registry.c"):
                continue
            for name in EXPORTED.findall(text):
                if not name.startswith("kr_kvm_") and name not in own:
                    problems.append(f"{f}: exports {name}: a method file exports only its table, kr_kvm_<name>, "
                                    f"and the selection {BASELINES} declares")
            continue
        if f != BASELINES:
            for name in sorted(own):
                if re.search(rf"\b{name}\b", text):
                    problems.append(f"{f}: calls {name}, a method's own: only runtime/kv/methods/ may")
        for m in METHOD_SWITCH.finditer(text):
            problems.append(f"{f}: switches on a KV method ({m.group(0)}): ask its table (kv_method.h)")
        for m in sorted(set(METHOD_OWN.findall(text))):
            problems.append(f"{f}: names {m}, a method's own: only runtime/kv/methods/ may")
    return problems


def tracked(root):
    out = subprocess.check_output(["git", "-C", root, "ls-files"], text=True)
    return [f for f in out.split() if os.path.isfile(os.path.join(root, f))]


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
    files = tracked(root)
    problems = []
    # where each runtime header lives
    owner = {}
    for f in files:
        parts = f.split("/")
        if len(parts) == 3 and parts[0] == "runtime" and f.endswith(".h"):
            owner[parts[2]] = parts[1]
    edges = {}
    for f in files:
        if not f.endswith((".c", ".h")):
            continue
        text = open(os.path.join(root, f), errors="replace").read()
        parts = f.split("/")
        for inc in INCLUDE.findall(text):
            name = os.path.basename(inc)
            target = owner.get(name)
            if parts[0] == "runtime" and len(parts) >= 3 and parts[1] in MAY_CALL:
                src = parts[1]
                if target and target != src and target != "include":
                    edges.setdefault(src, set()).add(target)
                    if target not in MAY_CALL[src]:
                        problems.append(f"{f}: includes {inc} of runtime/{target}/, which {src} may not call")
                    elif name not in ONLY_HEADERS.get((src, target), {name}):
                        problems.append(f"{f}: includes {inc}; {src} uses only {sorted(ONLY_HEADERS[(src, target)])} of runtime/{target}/")
            elif parts[0] in ("kernels_cpu", "platform"):
                if target or name == "kara.h":
                    problems.append(f"{f}: includes {inc}: kernels_cpu and platform see nothing of the runtime")
            elif parts[0] == "tools" and target and target != "include":
                problems.append(f"{f}: includes {inc} of runtime/{target}/: the tools see kara.h alone")
    # cycles between folders
    state = {}

    def visit(node, path):
        state[node] = 1
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                cycle = path[path.index(nxt):] + [nxt]
                problems.append("include cycle between runtime folders: " + " -> ".join(cycle))
            elif nxt not in state:
                visit(nxt, path + [nxt])
        state[node] = 2

    for node in sorted(edges):
        if node not in state:
            visit(node, [node])
    problems += method_problems(root, files)
    # file lengths
    for f in files:
        if f in GENERATED or not f.endswith((".c", ".h", ".py", ".sh")):
            continue
        n = sum(1 for _ in open(os.path.join(root, f), errors="replace"))
        cap = LONGER.get(f, MAX_LINES)
        if n > cap:
            problems.append(f"{f}: {n} lines (at most {cap})")
    for p in problems:
        print("check_layout: " + p)
    if not problems:
        print("check_layout: folders, includes, KV methods and file lengths as docs/ARCHITECTURE.md says")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
