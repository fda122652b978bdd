"""cpg-mcp as a host runs it: a subprocess speaking JSON-RPC over stdio."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from conftest import EXAMPLE

CPG_MCP = str(Path(sys.executable).with_name("cpg-mcp"))
CPG = str(Path(sys.executable).with_name("cpg"))


def frame(message_id: int | None, method: str, params: dict[str, Any] | None = None) -> bytes:
    body: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if message_id is not None:
        body["id"] = message_id
    if params is not None:
        body["params"] = params
    return (json.dumps(body) + "\n").encode()


def read_response(proc: subprocess.Popen[bytes], message_id: int) -> dict[str, Any]:
    assert proc.stdout is not None
    while True:
        line = proc.stdout.readline()
        assert line, "the server closed stdout"
        message = json.loads(line)  # every line on stdout must be a JSON-RPC frame
        assert message["jsonrpc"] == "2.0"
        if message.get("id") == message_id:
            return message


def start(args: list[str], command: list[str] | None = None) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        (command or [CPG_MCP]) + args,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "TMPDIR": os.environ.get("TMPDIR", "/tmp")},
    )


def handshake(proc: subprocess.Popen[bytes]) -> dict[str, Any]:
    assert proc.stdin is not None
    proc.stdin.write(
        frame(
            1,
            "initialize",
            {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "raw-test", "version": "0"},
            },
        )
    )
    proc.stdin.flush()
    init = read_response(proc, 1)
    proc.stdin.write(frame(None, "notifications/initialized"))
    proc.stdin.flush()
    return init


def test_raw_wire_and_a_clean_exit_on_eof(tmp_path: Path) -> None:
    shutil.copy(EXAMPLE, tmp_path / "drops.jsonl")
    for command in ([CPG_MCP], [CPG, "mcp"]):
        proc = start(["--allow-replay-dir", str(tmp_path)], command)
        assert proc.stdin is not None and proc.stdout is not None
        init = handshake(proc)
        assert init["result"]["protocolVersion"] == "2025-06-18"
        assert init["result"]["serverInfo"]["name"] == "cpg-mcp"
        proc.stdin.write(frame(2, "tools/list", {}))
        proc.stdin.flush()
        tools = read_response(proc, 2)["result"]["tools"]
        assert len(tools) == 9
        proc.stdin.write(frame(9, "tools/call", {"name": "apply_policy", "arguments": {}}))
        proc.stdin.flush()
        refused = read_response(proc, 9)["error"]
        assert refused["code"] == -32602 and "unknown tool 'apply_policy'" in refused["message"]
        proc.stdin.write(
            frame(
                3,
                "tools/call",
                {"name": "start_session", "arguments": {"replay_file": "drops.jsonl"}},
            )
        )
        proc.stdin.flush()
        started = read_response(proc, 3)["result"]["structuredContent"]
        proc.stdin.write(
            frame(
                4,
                "tools/call",
                {"name": "get_status", "arguments": {"session_id": started["session_id"]}},
            )
        )
        proc.stdin.flush()
        tmp_dir = Path(read_response(proc, 4)["result"]["structuredContent"]["tmp_dir"])
        assert tmp_dir.is_dir()
        proc.stdin.close()  # EOF: the host is gone
        rest = proc.stdout.read()
        assert proc.wait(timeout=15) == 0
        for line in rest.splitlines():
            assert json.loads(line)["jsonrpc"] == "2.0"
        assert started["session_id"].startswith("sess_")
        assert not tmp_dir.exists(), "the session dir is removed"


def test_sigterm_stops_the_session_and_exits_quickly(tmp_path: Path) -> None:
    shutil.copy(EXAMPLE, tmp_path / "drops.jsonl")
    proc = start(["--allow-replay-dir", str(tmp_path)])
    assert proc.stdin is not None
    handshake(proc)
    proc.stdin.write(
        frame(
            2, "tools/call", {"name": "start_session", "arguments": {"replay_file": "drops.jsonl"}}
        )
    )
    proc.stdin.flush()
    read_response(proc, 2)
    proc.stdin.write(
        frame(3, "tools/call", {"name": "get_status", "arguments": {"session_id": "x"}})
    )
    proc.stdin.flush()
    read_response(proc, 3)
    began = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=10) == 0
    assert time.monotonic() - began < 10
