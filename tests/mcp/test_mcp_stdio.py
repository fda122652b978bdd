"""cpg-mcp as a host runs it: a subprocess speaking JSON-RPC over stdio."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from conftest import EXAMPLE, wait_for

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
    """The answer to ``message_id``; answers to other ids before it are skipped (send one
    request at a time, or use read_responses)."""
    assert proc.stdout is not None
    while True:
        line = proc.stdout.readline()
        assert line, "the server closed stdout"
        message = json.loads(line)  # every line on stdout must be a JSON-RPC frame
        assert message["jsonrpc"] == "2.0"
        if message.get("id") == message_id:
            return message


def read_responses(proc: subprocess.Popen[bytes], ids: set[int]) -> list[dict[str, Any]]:
    """The answers to ``ids``, in whatever order the server sends them."""
    assert proc.stdout is not None
    found: dict[int, dict[str, Any]] = {}
    while len(found) < len(ids):
        line = proc.stdout.readline()
        assert line, "the server closed stdout"
        message = json.loads(line)
        assert message["jsonrpc"] == "2.0"
        if message.get("id") in ids:
            found[message["id"]] = message
    return [found[i] for i in sorted(ids)]


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
        assert len(tools) == 13
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


def test_sigterm_mid_capture_removes_the_session_dir_and_exits_quickly(tmp_path: Path) -> None:
    from fake_relay import fake_relay, responses_from_lines

    responses = responses_from_lines(EXAMPLE.read_text().splitlines())
    with fake_relay(responses) as (relay, address):
        proc = start([])
        assert proc.stdin is not None
        handshake(proc)
        proc.stdin.write(
            frame(2, "tools/call", {"name": "start_session", "arguments": {"server": address}})
        )
        proc.stdin.flush()
        sid = read_response(proc, 2)["result"]["structuredContent"]["session_id"]
        assert relay.done.wait(10), "the relay streamed the capture"
        proc.stdin.write(
            frame(3, "tools/call", {"name": "get_status", "arguments": {"session_id": sid}})
        )
        proc.stdin.flush()
        status = read_response(proc, 3)["result"]["structuredContent"]
        assert status["state"] == "capturing"
        tmp_dir = Path(status["tmp_dir"])
        assert tmp_dir.is_dir()
        began = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
        assert time.monotonic() - began < 10
        assert not tmp_dir.exists(), "the session dir is removed"


def test_a_live_session_through_the_sdk_stdio_client(tmp_path: Path) -> None:
    """The SDK's own stdio client drives a live session against the fake relay; a tee keeps
    every byte cpg-mcp wrote to stdout so the test can check each is a JSON-RPC frame."""
    import anyio
    from mcp import Client, StdioServerParameters

    from fake_relay import fake_relay, responses_from_lines

    wire = tmp_path / "stdout.jsonl"
    session_tmp = tmp_path / "tmp"
    session_tmp.mkdir()
    responses = responses_from_lines(EXAMPLE.read_text().splitlines())

    async def drive(address: str) -> dict[str, Any]:
        params = StdioServerParameters(
            command="/bin/sh",
            args=["-c", f'"{CPG_MCP}" | tee "{wire}"'],
            env={"TMPDIR": str(session_tmp), "KUBECONFIG": os.environ["KUBECONFIG"]},
        )
        seen: dict[str, Any] = {}
        async with Client(params, mode="legacy") as client:

            async def call(tool: str, **args: Any) -> dict[str, Any]:
                result = await client.call_tool(tool, args)
                assert not result.is_error, result.content[0].text
                assert json.loads(result.content[0].text) == result.structured_content
                return result.structured_content

            sid = (await call("start_session", server=address, flush_interval="1s"))["session_id"]
            with anyio.fail_after(30):  # every flow of the capture is in, and flushed
                while True:
                    status = await call("get_status", session_id=sid)
                    if status["policy_file_count"] >= 6 and status["flows_seen"] >= 64:
                        break
                    await anyio.sleep(0.05)
            seen["status"] = await call("get_status", session_id=sid)
            assert seen["status"]["state"] == "capturing"
            again = await client.call_tool("start_session", {"server": address})
            assert again.is_error and "already running" in again.content[0].text
            seen["policies"] = await call("list_policies", session_id=sid)
            seen["policy"] = await call(
                "get_policy", session_id=sid, namespace="shop", workload="cart"
            )
            seen["evidence"] = await call(
                "get_evidence", session_id=sid, namespace="shop", workload="cart"
            )
            seen["dropped_live"] = await call("list_dropped_flows", session_id=sid)
            seen["health_live"] = await call("get_cluster_health", session_id=sid)
            seen["stop"] = await call("stop_session", session_id=sid)
            seen["stop_again"] = await call("stop_session", session_id=sid)
            seen["health"] = await call("get_cluster_health", session_id=sid)
            seen["dropped"] = await call("list_dropped_flows", session_id=sid)
        return seen  # leaving the block closed stdin: EOF

    with fake_relay(responses) as (_, address):
        seen = anyio.run(drive, address)

    assert seen["policies"]["total_count"] == 6
    assert "kind: CiliumNetworkPolicy" in seen["policy"]["yaml"]
    assert seen["evidence"]["matched_rules"]
    # While capturing: the counts so far, said to be so (not an empty "no infra drops").
    live_rows = seen["dropped_live"]["aggregates"]
    assert live_rows["so_far"] is True and "still running" in live_rows["message"]
    assert live_rows["rows"] == seen["dropped"]["aggregates"]["rows"], "every flow was in"
    assert seen["dropped_live"]["samples"], "samples are served while capturing"
    assert seen["health_live"]["so_far"] is True
    assert seen["health_live"]["report"]["drops"] == seen["health"]["report"]["drops"]
    assert seen["stop"]["already_stopped"] is False and seen["stop"]["flows_seen"] >= 64
    assert seen["stop_again"]["already_stopped"] is True
    assert seen["health"]["report"]["drops"]
    assert seen["dropped"]["aggregates"]["rows"]
    frames = wire.read_bytes().splitlines()
    assert len(frames) >= 15
    for line in frames:
        assert json.loads(line)["jsonrpc"] == "2.0"
    assert list(session_tmp.iterdir()) == [], "the session dir went with the process"


def test_audit_log_file_and_bad_options(tmp_path: Path) -> None:
    audit = tmp_path / "audit.jsonl"
    proc = start(["--audit-log", str(audit)])
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    handshake(proc)
    proc.stdin.write(
        frame(2, "tools/call", {"name": "get_status", "arguments": {"session_id": "sess_x"}})
    )
    proc.stdin.flush()
    text = read_response(proc, 2)["result"]["content"][0]["text"]
    proc.stdin.close()
    assert proc.wait(timeout=15) == 0
    lines = [json.loads(line) for line in audit.read_text().splitlines()]
    assert [(r["tool"], r["outcome"]) for r in lines] == [("get_status", "error")]
    assert text.endswith(f"(trace {lines[0]['trace_id']})")
    assert f"trace {lines[0]['trace_id']}" in proc.stderr.read().decode()
    for args, complaint in (
        (["--tool-timeout", "0"], "must be more than 0"),
        (["--audit-log", str(tmp_path / "missing" / "a.log")], "give a writable file path"),
        (["--allow-replay-dir", str(tmp_path / "nope")], "is not a folder"),
    ):
        bad = subprocess.run([CPG_MCP, *args], capture_output=True, text=True, timeout=30)
        assert bad.returncode == 2 and complaint in bad.stderr and bad.stdout == ""


def test_eof_mid_replay_stops_the_replay_and_leaves_nothing(tmp_path: Path) -> None:
    """The session is stopped before its folder is removed, so the
    replay cannot recreate it; the server exits promptly."""
    from conftest import endpoint, flow_dict, jsonl

    captures, private_tmp = tmp_path / "captures", tmp_path / "tmp"
    captures.mkdir()
    private_tmp.mkdir()
    block = jsonl(
        [flow_dict(dst=endpoint("shop", f"svc-{i % 500}"), tcp=8000 + i % 9) for i in range(4000)]
    )
    (captures / "big.jsonl").write_text(block * 30)  # a replay of several seconds
    proc = subprocess.Popen(
        [CPG_MCP, "--allow-replay-dir", str(captures)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "TMPDIR": str(private_tmp)},
    )
    assert proc.stdin is not None
    handshake(proc)
    proc.stdin.write(
        frame(2, "tools/call", {"name": "start_session", "arguments": {"replay_file": "big.jsonl"}})
    )
    proc.stdin.flush()
    assert "result" in read_response(proc, 2)
    running = [p.name[:8] for p in private_tmp.iterdir() if not p.name.startswith("pymp-")]
    assert running == ["cpg-mcp-"], "the session runs (beside the worker server's socket)"
    began = time.monotonic()
    proc.stdin.close()
    assert proc.wait(timeout=15) == 0
    assert time.monotonic() - began < 10
    assert not list(private_tmp.iterdir()), "no session folder, no kube temp file left"


def test_every_message_with_an_id_is_answered_even_malformed_ones() -> None:
    """Over the real stdio wire: each malformed line with an id (a null id too) gets an
    error answer; a notification gets none."""
    proc = start([])
    assert proc.stdin is not None and proc.stdout is not None
    before = {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "x"}}
    lines = [
        b"{not json\n",
        b"\xff\xfe\x00 not utf-8\n",
        b"[]\n",
        b'[{"jsonrpc": "2.0", "id": 5, "method": "ping"}]\n',
        b'{"jsonrpc": "1.0", "id": 7, "method": "ping"}\n',
        b'{"jsonrpc": "2.0", "id": {"a": 1}, "method": "ping"}\n',
        b'{"jsonrpc": "2.0", "id": 1e400, "method": "ping"}\n',
        b'{"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": "x"}\n',
        b'{"jsonrpc": "2.0", "id": null, "method": "ping"}\n',
        json.dumps(before).encode() + b"\n",
        b'{"jsonrpc": "2.0", "method": "notifications/oops", "params": 5}\n',  # no answer
    ]
    for line in lines:
        proc.stdin.write(line)
    proc.stdin.flush()
    answers = []
    for _ in range(10):
        message = json.loads(proc.stdout.readline())
        assert message["jsonrpc"] == "2.0" and "error" in message
        answers.append((message["id"], message["error"]["code"]))
    assert answers == [
        (None, -32700),
        (None, -32700),
        (None, -32600),
        (None, -32600),
        (7, -32600),
        (None, -32600),
        (None, -32600),
        (9, -32602),
        (None, -32600),
        (3, -32600),
    ]
    init = handshake(proc)  # the server is still fine
    assert init["result"]["serverInfo"]["name"] == "cpg-mcp"
    proc.stdin.close()
    assert proc.wait(timeout=10) == 0


def test_sigterm_leaves_no_client_key_under_tmpdir(tmp_path: Path) -> None:
    """A kubeconfig with inline credentials makes the Kubernetes
    client write them to files; they go to a private folder that every exit removes."""
    import base64

    private_tmp = tmp_path / "tmp"
    private_tmp.mkdir()
    secret = b"-----BEGIN PRIVATE KEY-----\nnot-a-real-key-but-secret\n-----END PRIVATE KEY-----\n"
    pem = b"-----BEGIN CERTIFICATE-----\nnot-a-real-cert\n-----END CERTIFICATE-----\n"
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": "c",
                "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}],
                "clusters": [
                    {
                        "name": "k",
                        "cluster": {
                            "server": "https://127.0.0.1:9",
                            "certificate-authority-data": base64.b64encode(pem).decode(),
                        },
                    }
                ],
                "users": [
                    {
                        "name": "u",
                        "user": {
                            "client-certificate-data": base64.b64encode(pem).decode(),
                            "client-key-data": base64.b64encode(secret).decode(),
                        },
                    }
                ],
            }
        )
    )
    proc = subprocess.Popen(
        [CPG_MCP],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "TMPDIR": str(private_tmp), "KUBECONFIG": str(kubeconfig)},
    )
    assert proc.stdin is not None
    handshake(proc)
    proc.stdin.write(
        frame(2, "tools/call", {"name": "get_bootstrap_policy", "arguments": {"namespace": "shop"}})
    )
    proc.stdin.flush()
    read_response(proc, 2)
    proc.stdin.write(frame(3, "tools/call", {"name": "start_session", "arguments": {}}))
    proc.stdin.flush()
    read_response(proc, 3)  # the port-forward fails: nothing listens on 127.0.0.1:9
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=10) == 0
    left = [p for p in private_tmp.rglob("*")]
    assert not left, left
    assert not any(secret in p.read_bytes() for p in private_tmp.rglob("*") if p.is_file())


def _cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@pytest.mark.parametrize("tool", ["list_dropped_flows", "get_report", "get_plan"])
def test_thirty_expiring_calls_are_answered_and_the_server_goes_idle(
    tmp_path: Path, tool: str
) -> None:
    """Over the raw wire: every late call is answered, and the work behind them stops
    instead of trickling on (each heavy tool checks its deadline while it reads)."""
    import threading

    from conftest import flow_dict, jsonl

    captures = tmp_path / "captures"
    captures.mkdir()
    (captures / "one.jsonl").write_text(jsonl([flow_dict()]))
    deadline = 0.5
    proc = start(["--allow-replay-dir", str(captures), "--tool-timeout", str(deadline)])
    assert proc.stdin is not None
    try:
        handshake(proc)
        proc.stdin.write(
            frame(
                2,
                "tools/call",
                {"name": "start_session", "arguments": {"replay_file": "one.jsonl"}},
            )
        )
        proc.stdin.flush()
        sid = read_response(proc, 2)["result"]["structuredContent"]["session_id"]
        for _ in range(200):
            proc.stdin.write(
                frame(3, "tools/call", {"name": "get_status", "arguments": {"session_id": sid}})
            )
            proc.stdin.flush()
            status = read_response(proc, 3)["result"]["structuredContent"]
            if status["state"] == "stopped":
                break
        (evidence,) = Path(status["tmp_dir"]).glob("evidence/*/shop/cart.json")
        text = evidence.read_text()
        for i in range(4000):  # 4,000 evidence files to read per call
            folder = evidence.parent.parent / f"ns-{i % 20}"
            folder.mkdir(exist_ok=True)
            (folder / f"svc-{i:04}.json").write_text(text)
        for n in range(30):
            proc.stdin.write(
                frame(
                    100 + n,
                    "tools/call",
                    {"name": tool, "arguments": {"session_id": sid}},
                )
            )
        proc.stdin.flush()
        answers = read_responses(proc, {100 + n for n in range(30)})
        answered = time.monotonic()
        assert all("result" in a or "error" in a for a in answers)
        assert any(a.get("result", {}).get("isError") for a in answers)
        # Idle again: the server's CPU time stops growing within deadline + 2 s.
        idle = False
        previous = _cpu_seconds(proc.pid)
        while time.monotonic() - answered < deadline + 2:
            threading.Event().wait(0.25)  # a sampling interval, not a wait for an event
            now = _cpu_seconds(proc.pid)
            if now - previous < 0.03:
                idle = True
                break
            previous = now
        assert idle, "reading threads kept running after their calls were answered"
        proc.stdin.write(
            frame(500, "tools/call", {"name": "get_status", "arguments": {"session_id": sid}})
        )
        proc.stdin.flush()
        assert "result" in read_response(proc, 500)
        for n in range(30):  # late calls again, and stdin closed right after their answers
            proc.stdin.write(
                frame(600 + n, "tools/call", {"name": tool, "arguments": {"session_id": sid}})
            )
        proc.stdin.flush()
        read_responses(proc, {600 + n for n in range(30)})
        session_dir = Path(status["tmp_dir"])
        proc.stdin.close()
        assert proc.wait(timeout=10) == 0, "EOF: exit and clean up within 10 s"
        assert not session_dir.exists()
    finally:
        if not proc.stdin.closed:
            proc.stdin.close()
        proc.wait(timeout=10)


def test_get_plan_through_the_sdk_stdio_client(tmp_path: Path) -> None:
    """get_plan over stdio, with the SDK's own client: a stopped replay session's plan."""
    import anyio
    from mcp import Client, StdioServerParameters

    from captures import ingress_capture

    captures = tmp_path / "captures"
    captures.mkdir()
    ingress_capture(captures / "all.jsonl", allowed_by=True)

    async def drive() -> dict[str, Any]:
        params = StdioServerParameters(
            command=CPG_MCP,
            args=["--allow-replay-dir", str(captures)],
            env={"TMPDIR": str(tmp_path)},
        )
        async with Client(params, mode="legacy") as client:
            started = await client.call_tool("start_session", {"replay_file": "all.jsonl"})
            sid = started.structured_content["session_id"]
            with anyio.fail_after(30):
                while (
                    await client.call_tool("get_status", {"session_id": sid})
                ).structured_content["state"] != "stopped":
                    await anyio.sleep(0.05)
            result = await client.call_tool("get_plan", {"session_id": sid})
            assert not result.is_error, result.content[0].text
            newly = await client.call_tool(
                "get_plan", {"session_id": sid, "section": "newly_enforced"}
            )
            assert not newly.is_error, newly.content[0].text
            return {**result.structured_content, **newly.structured_content}

    plan = anyio.run(drive)
    assert plan["would_break_flows"] == 12
    assert plan["would_break"][0]["traffic"]["destination"] == "shop/api"
    assert plan["newly_enforced"][0]["pods"] == ["api-v2-a"]


def test_explain_flow_through_the_sdk_stdio_client(tmp_path: Path) -> None:
    """explain_flow and trace_flow over stdio, with the SDK's own client."""
    import anyio
    from mcp import Client, StdioServerParameters

    from captures import ingress_capture

    captures = tmp_path / "captures"
    captures.mkdir()
    ingress_capture(captures / "all.jsonl", allowed_by=True)

    async def drive() -> tuple[dict[str, Any], dict[str, Any]]:
        params = StdioServerParameters(
            command=CPG_MCP,
            args=["--allow-replay-dir", str(captures)],
            env={"TMPDIR": str(tmp_path)},
        )
        async with Client(params, mode="legacy") as client:
            started = await client.call_tool("start_session", {"replay_file": "all.jsonl"})
            sid = started.structured_content["session_id"]
            with anyio.fail_after(30):
                while (
                    await client.call_tool("get_status", {"session_id": sid})
                ).structured_content["state"] != "stopped":
                    await anyio.sleep(0.05)
            why = await client.call_tool(
                "explain_flow", {"session_id": sid, "verdict": "FORWARDED"}
            )
            trace = await client.call_tool(
                "trace_flow",
                {
                    "session_id": sid,
                    "source": "monitoring/prometheus",
                    "destination": "shop/api",
                    "port": "9090/TCP",
                },
            )
            assert not why.is_error and not trace.is_error, (why.content, trace.content)
            return why.structured_content, trace.structured_content

    why, trace = anyio.run(drive)
    assert {a["traffic"].split(" ", 1)[1].strip() for a in why["answers"]} >= {
        "monitoring/prometheus → shop/api TCP/9090"
    }
    (ingress,) = [a for a in trace["answers"] if a["direction"] == "ingress"]
    assert ingress["allowed"] is False and ingress["policed_by"] == ["shop/cpg-api"]


def test_a_shadow_session_through_the_sdk_stdio_client(tmp_path: Path) -> None:
    """start_session with shadow_policies over stdio: get_plan says what would break so far
    while the stream runs, then the final plan; nothing is written to the proposed folder."""
    import anyio
    from mcp import Client, StdioServerParameters

    from captures import ingress_capture
    from conftest import cpg
    from fake_relay import fake_relay, responses_from_lines

    allowed = tmp_path / "allowed"
    allowed.mkdir()
    capture = ingress_capture(tmp_path / "all.jsonl", allowed_by=True)
    proposed = allowed / "proposed"
    assert cpg("replay", str(capture), "-d", str(proposed), "--no-evidence").returncode == 0
    before = {p: p.read_bytes() for p in proposed.rglob("*") if p.is_file()}
    responses = responses_from_lines(capture.read_text().splitlines())

    async def drive(address: str) -> tuple[dict[str, Any], dict[str, Any]]:
        params = StdioServerParameters(
            command=CPG_MCP,
            args=["--allow-replay-dir", str(allowed)],
            env={"TMPDIR": str(tmp_path), "KUBECONFIG": os.environ["KUBECONFIG"]},
        )
        async with Client(params, mode="legacy") as client:

            async def call(tool: str, **args: Any) -> dict[str, Any]:
                result = await client.call_tool(tool, args)
                assert not result.is_error, result.content[0].text
                return result.structured_content

            sid = (await call("start_session", server=address, shadow_policies="proposed"))[
                "session_id"
            ]
            with anyio.fail_after(30):
                while (await call("get_status", session_id=sid))["flows_seen"] < len(responses):
                    await anyio.sleep(0.05)
            so_far = await call("get_plan", session_id=sid)
            await call("stop_session", session_id=sid)
            return so_far, await call("get_plan", session_id=sid)

    with fake_relay(responses) as (_, address):
        so_far, final = anyio.run(drive, address)
    assert so_far["so_far"] is True and so_far["verdict"] == "breaks"
    assert so_far["would_break"][0]["traffic"]["source"] == "monitoring/prometheus"
    assert "so_far" not in final and final["would_break_flows"] == 12
    assert {p: p.read_bytes() for p in proposed.rglob("*") if p.is_file()} == before


def _alive(pid: int) -> bool:
    """Running, not a zombie waiting to be reaped."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _descendants(pid: int) -> set[int]:
    parents = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            parents[int(entry.name)] = int(stat[1])
    found, grew = {pid}, True
    while grew:
        more = {child for child, parent in parents.items() if parent in found} - found
        found |= more
        grew = bool(more)
    return found - {pid}


def test_eof_with_heavy_calls_in_flight_exits_at_once_and_leaves_no_worker(
    tmp_path: Path,
) -> None:
    """Stdin closes while plans run in worker processes: the server exits promptly, its
    workers (and the server they fork from) with it, and its temp folders are gone."""
    from conftest import endpoint, flow_dict, jsonl

    captures, private_tmp = tmp_path / "captures", tmp_path / "tmp"
    captures.mkdir()
    private_tmp.mkdir()
    (captures / "one.jsonl").write_text(jsonl([flow_dict()]))
    flows = [
        flow_dict(src=endpoint(f"ns-{i % 40}", f"c-{i}"), dst=endpoint("shop", f"s-{i % 300}"))
        for i in range(20_000)
    ]
    (captures / "big.jsonl").write_text(jsonl(flows))
    proc = subprocess.Popen(
        [CPG_MCP, "--allow-replay-dir", str(captures)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "TMPDIR": str(private_tmp)},
    )
    assert proc.stdin is not None
    handshake(proc)
    start_call = {"name": "start_session", "arguments": {"replay_file": "one.jsonl"}}
    proc.stdin.write(frame(2, "tools/call", start_call))
    proc.stdin.flush()
    sid = read_response(proc, 2)["result"]["structuredContent"]["session_id"]
    for n in range(100):
        status_call = {"name": "get_status", "arguments": {"session_id": sid}}
        proc.stdin.write(frame(10 + n, "tools/call", status_call))
        proc.stdin.flush()
        if read_response(proc, 10 + n)["result"]["structuredContent"]["state"] == "stopped":
            break
    for index in range(4):
        plan_call = {
            "name": "get_plan",
            "arguments": {
                "session_id": sid,
                "capture": "big.jsonl",
                "policy_map_max": 9000 + index,
            },
        }
        proc.stdin.write(frame(500 + index, "tools/call", plan_call))
    proc.stdin.flush()
    # the forkserver and at least one worker (a long TMPDIR, as here, is no obstacle)
    if not wait_for(lambda: len(_descendants(proc.pid)) >= 2, 30):
        proc.stdin.close()
        proc.wait(10)
        raise AssertionError(f"no worker started: {proc.stderr.read()[-3000:]!r}")
    workers = _descendants(proc.pid)
    closed = time.monotonic()
    proc.stdin.close()
    assert proc.wait(timeout=15) == 0
    exited = time.monotonic() - closed
    assert exited < 3.0, f"exit took {exited:.2f} s"
    assert wait_for(lambda: not any(_alive(pid) for pid in workers), 3), "a worker runs on"
    left = list(private_tmp.iterdir())
    assert not left, f"left behind: {left}"


def test_an_over_long_line_is_one_error_and_the_server_lives_on() -> None:
    """Issue 67: a 400 MB request line peaked at 2.5 GB and an 800 MB one killed the server.
    A line over the cap is read past in pieces and answered once (id null, as for any line
    that cannot be read); the next request is answered, and memory stays small."""
    proc = start([])
    assert proc.stdin is not None and proc.stdout is not None
    handshake(proc)
    stdin = proc.stdin

    def send() -> None:
        stdin.write(b'{"jsonrpc": "2.0", "id": 7, "method": "ping", "x": "')
        for _ in range(200):  # 200 MiB, a piece at a time
            stdin.write(b"a" * (1 << 20))
        stdin.write(b'"}\n' + frame(8, "tools/list"))
        stdin.flush()

    writer = threading.Thread(target=send)
    writer.start()
    refused = json.loads(proc.stdout.readline())
    assert refused["id"] is None and refused["error"]["code"] == -32600
    assert "a message of over 8 MiB" in refused["error"]["message"]
    listed = read_response(proc, 8)
    assert {t["name"] for t in listed["result"]["tools"]} >= {"start_session", "get_plan"}
    writer.join()
    # the server's own high-water mark (its helper processes are not the line's reader)
    status = Path(f"/proc/{proc.pid}/status").read_text()
    peak_kib = int(status.split("VmHWM:")[1].split()[0])
    proc.stdin.close()
    assert proc.wait(timeout=30) == 0
    assert peak_kib < 300 * 1024, f"peak {peak_kib // 1024} MiB for a 200 MiB line"
