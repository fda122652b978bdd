"""cpg-mcp under expiring deadlines: 30 concurrent heavy calls (list_dropped_flows over a
session with 4,000 evidence files) with ``--tool-timeout 2``. Prints the slowest answer after
the calls were sent, how long the server kept a CPU busy after the last answer, and the time
from closing its stdin to its exit (the session folder removed).

    python benchmarks/mcp_deadlines.py [CALLS] [TIMEOUT] [--server PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def frame(message_id: int, method: str, params: dict[str, Any] | None = None) -> bytes:
    body: dict[str, Any] = {"jsonrpc": "2.0", "id": message_id, "method": method}
    if params is not None:
        body["params"] = params
    return (json.dumps(body) + "\n").encode()


def _stat(pid: int) -> list[str]:
    with open(f"/proc/{pid}/stat") as handle:
        return handle.read().rsplit(")", 1)[1].split()


def cpu_seconds(pid: int) -> float:
    """CPU time of the server and every process under it (its workers): the work a call
    left behind shows wherever it runs."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                parents[int(entry)] = int(_stat(int(entry))[1])
            except (OSError, IndexError):
                continue
    tree, grew = {pid}, True
    while grew:
        more = {child for child, parent in parents.items() if parent in tree} - tree
        tree |= more
        grew = bool(more)
    total = 0.0
    for member in tree:
        try:
            fields = _stat(member)
        except OSError:
            continue
        total += sum(int(fields[i]) for i in (11, 12, 13, 14))  # own and reaped children
    return total / os.sysconf("SC_CLK_TCK")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("calls", nargs="?", type=int, default=30)
    parser.add_argument("timeout", nargs="?", type=float, default=2.0)
    parser.add_argument("--server", default=str(ROOT / ".venv" / "bin" / "cpg-mcp"))
    parser.add_argument(
        "--tool", default="list_dropped_flows", help="list_dropped_flows, get_report or get_plan"
    )
    parser.add_argument(
        "--capture",
        type=Path,
        help="the capture replayed and planned (default: the example capture, 300 times)",
    )
    parser.add_argument(
        "--close-at-once",
        action="store_true",
        help="close stdin right after the last answer (abandoned work still running)",
    )
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="cpg-deadlines-"))
    captures = scratch / "captures"
    captures.mkdir()
    # the example capture, repeated: a plan reads it whole on every call
    if args.capture is not None:
        (captures / "drops.jsonl").write_bytes(args.capture.read_bytes())
    else:
        (captures / "drops.jsonl").write_bytes(
            (ROOT / "examples" / "drops.jsonl").read_bytes() * 300
        )
    proc = subprocess.Popen(
        [args.server, "--allow-replay-dir", str(captures), "--tool-timeout", str(args.timeout)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert proc.stdin is not None and proc.stdout is not None
    replies: dict[int, tuple[float, dict[str, Any]]] = {}
    arrived = threading.Condition()

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            message = json.loads(line)
            with arrived:
                replies[message.get("id")] = (time.monotonic(), message)
                arrived.notify_all()

    threading.Thread(target=read, daemon=True).start()

    def ask(message_id: int, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        assert proc.stdin is not None
        proc.stdin.write(frame(message_id, method, params))
        proc.stdin.flush()
        with arrived:
            arrived.wait_for(lambda: message_id in replies, timeout=120)
        return replies[message_id][1]

    ask(
        1,
        "initialize",
        {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "bench", "version": "0"},
        },
    )
    proc.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
    start = ask(
        2, "tools/call", {"name": "start_session", "arguments": {"replay_file": "drops.jsonl"}}
    )
    sid = start["result"]["structuredContent"]["session_id"]
    for n in range(900):
        status = ask(10 + n, "tools/call", {"name": "get_status", "arguments": {"session_id": sid}})
        if status["result"]["structuredContent"]["state"] == "stopped":
            break
        time.sleep(0.2)
    session = Path(status["result"]["structuredContent"]["tmp_dir"])
    evidence = next(session.glob("evidence/*/*/*.json"))
    text = evidence.read_text()
    for i in range(4000):
        folder = evidence.parent.parent / f"ns-{i % 20}"
        folder.mkdir(exist_ok=True)
        (folder / f"svc-{i:04}.json").write_text(text)
    ids = list(range(1000, 1000 + args.calls))
    sent = time.monotonic()
    for message_id in ids:
        arguments: dict[str, Any] = {"session_id": sid}
        if args.tool == "list_dropped_flows":
            arguments["limit"] = 200
        if args.tool == "get_plan":
            arguments["policy_map_max"] = 10_000 + message_id  # no call answers from the cache
        proc.stdin.write(
            frame(message_id, "tools/call", {"name": args.tool, "arguments": arguments})
        )
    proc.stdin.flush()
    time.sleep(0.5)  # the heavy calls are running: a cheap one now
    cheap_sent = time.monotonic()
    cheap = ask(999, "tools/call", {"name": "list_policies", "arguments": {"session_id": sid}})
    cheap_seconds = replies[999][0] - cheap_sent
    cheap_ok = not cheap.get("result", {}).get("isError")
    with arrived:
        arrived.wait_for(lambda: all(i in replies for i in ids), timeout=600)
    last = max(replies[i][0] for i in ids)
    latest = max(replies[i][0] - sent for i in ids)
    at_last = cpu_seconds(proc.pid)
    time.sleep(1.0)
    burned = cpu_seconds(proc.pid) - at_last
    timeouts = sum(1 for i in ids if replies[i][1].get("result", {}).get("isError"))
    before = cpu_seconds(proc.pid)
    busy = 0.0
    previous = before
    while not args.close_at_once:  # sample until the server's CPU time stops growing
        time.sleep(0.25)
        now = cpu_seconds(proc.pid)
        if now - previous < 0.03:
            break
        previous = now
        busy = time.monotonic() - last
        if busy > 120:
            break
    closed = time.monotonic()
    proc.stdin.close()
    proc.wait(timeout=300)
    exited = time.monotonic() - closed
    print(f"{args.tool}: calls {args.calls}, tool timeout {args.timeout:g}s, {timeouts} timed out")
    print(
        f"slowest answer      {latest:6.2f} s after sending (deadline + "
        f"{latest - args.timeout:.2f} s)"
    )
    print(f"list_policies meanwhile {cheap_seconds:6.2f} s ({'answered' if cheap_ok else 'error'})")
    print(f"CPU in the 1 s after the last answer {burned:5.2f} CPU-s")
    print(f"CPU busy after last {busy:6.2f} s")
    print(f"EOF to exit         {exited:6.2f} s; session folder left: {session.exists()}")
    sys.exit(0)


if __name__ == "__main__":
    main()
