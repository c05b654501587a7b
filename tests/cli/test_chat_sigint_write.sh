#!/usr/bin/env bash
# A Ctrl-C that lands while `kara chat` is blocked writing a reply to a full
# stdout must stop the reply, not the session. Without SA_RESTART on the
# SIGINT handler during a reply the blocked write(2) failed with EINTR, stdio
# dropped its buffer, and chat exited 74 with "cannot write stdout:
# Interrupted system call" (seen as test_chat_pty failing now and then). Here
# stdout is a pipe shrunk to one page that nobody reads for 3 s, so 40 answers
# to the same question fill it and the writer blocks; then SIGINT, then the
# pipe is drained: the session ends normally with every other answer intact.
set -u
. "$(dirname "$0")/lib/common.sh"
SRC="${KARA_SOURCE_DIR:?KARA_SOURCE_DIR must name the source tree}"
M="$SRC/tools/train/model/kara-reasoner-1m.gguf"
prompt=$(head -1 "$SRC/tests/data/late-tier1.jsonl" | python3 -c 'import json,sys; print(json.load(sys.stdin)["prompt"])')
answer=$(head -1 "$SRC/tests/data/late-tier1.jsonl" | python3 -c 'import json,sys; print(json.load(sys.stdin)["answer"])')
python3 - "$KARA" "$M" "$prompt" "$tmp/out" "$tmp/err" <<'PY' >"$tmp/rc"
import fcntl, os, signal, subprocess, sys, time
kara, model, prompt, out_path, err_path = sys.argv[1:6]
r, w = os.pipe()
fcntl.fcntl(w, 1031, 4096)  # F_SETPIPE_SZ: one page
with open(err_path, "wb") as err:
    p = subprocess.Popen([kara, "chat", "-m", model, "--temp", "0"], stdin=subprocess.PIPE, stdout=w, stderr=err)
    os.close(w)
    p.stdin.write("".join(prompt + "\n/clear\n" for _ in range(40)).encode())
    p.stdin.close()
    time.sleep(3)  # the pipe fills and chat blocks in write(2)
    blocked = p.poll() is None
    p.send_signal(signal.SIGINT)
    out = b""
    while True:
        b = os.read(r, 65536)
        if not b:
            break
        out += b
    rc = p.wait()
open(out_path, "wb").write(out)
print(rc, int(blocked))
PY
read -r rc blocked <"$tmp/rc"
check "chat was still writing when SIGINT came (the pipe was full)" '[ "$blocked" = 1 ]'
check "chat exits 0 after the interrupted write (rc $rc)" '[ "$rc" = 0 ]'
check "no 'cannot write stdout' on stderr" '! grep -q "cannot write stdout" "$tmp/err"'
n=$(grep -cx "$answer" "$tmp/out")
check "at least 39 of the 40 answers reach stdout ($n; the interrupted reply may stop early)" '[ "$n" -ge 39 ]'
finish
