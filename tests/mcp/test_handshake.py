"""``initialize`` answered before the SDK is loaded (``cpg_mcp.handshake``): the same answer
the SDK gives, once, and the session goes on as if the SDK had answered."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from cpg_mcp.handshake import HANDSHAKE_VERSIONS, PrefixedReader, initialize_answer

CPG_MCP = str(Path(sys.executable).with_name("cpg-mcp"))
CLIENT = {"name": "probe", "version": "1.0"}


def initialize(message_id: int | str, version: str, **params: Any) -> dict[str, Any]:
    body = {"protocolVersion": version, "capabilities": {}, "clientInfo": CLIENT, **params}
    return {"jsonrpc": "2.0", "id": message_id, "method": "initialize", "params": body}


def conversation(lines: list[bytes]) -> list[dict[str, Any]]:
    """Every frame cpg-mcp writes for ``lines`` (stdin closed after them)."""
    done = subprocess.run(
        [CPG_MCP], input=b"".join(lines), capture_output=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr.decode()
    return [json.loads(line) for line in done.stdout.splitlines() if line.strip()]


def encoded(message: dict[str, Any]) -> bytes:
    return json.dumps(message).encode() + b"\n"


def sdk_answer(message: dict[str, Any]) -> dict[str, Any]:
    """The SDK's own answer: a blank first line keeps cpg-mcp from answering early."""
    frames = conversation([b"\n", encoded(message)])
    return next(f for f in frames if f.get("id") == message["id"])


@pytest.mark.parametrize("version", [*HANDSHAKE_VERSIONS, "2026-07-28", "1999-01-01"])
def test_the_early_answer_is_the_sdks_for_every_revision(version: str) -> None:
    from cpg_io.version import cpg_version

    message = initialize(7, version)
    early = initialize_answer(encoded(message).rstrip(b"\n"), cpg_version())
    assert early is not None and early[0] == 7
    assert json.loads(early[1]) == sdk_answer(message)


def test_one_answer_and_the_session_goes_on() -> None:
    """The client sees one answer to its initialize (the SDK's is dropped), then the tools."""
    frames = conversation(
        [
            encoded(initialize(1, "2025-06-18", capabilities={"roots": {"listChanged": True}})),
            encoded({"jsonrpc": "2.0", "method": "notifications/initialized"}),
            encoded({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
        ]
    )
    answers = [f for f in frames if f.get("id") == 1]
    assert len(answers) == 1 and answers[0]["result"]["protocolVersion"] == "2025-06-18"
    tools = next(f for f in frames if f.get("id") == 2)
    assert "start_session" in {t["name"] for t in tools["result"]["tools"]}


@pytest.mark.parametrize(
    "message",
    [
        {"jsonrpc": "2.0", "id": 3, "method": "initialize", "params": {"protocolVersion": 5}},
        {"jsonrpc": "2.0", "id": 3, "method": "ping"},
        {"jsonrpc": "2.0", "id": True, "method": "initialize", "params": {}},
        {"jsonrpc": "1.0", "id": 3, "method": "initialize", "params": {}},
    ],
)
def test_anything_but_a_well_formed_initialize_is_left_to_the_sdk(message: dict[str, Any]) -> None:
    assert initialize_answer(encoded(message).rstrip(b"\n"), "1") is None
    assert initialize_answer(b"not json {", "1") is None


def test_a_bad_initialize_gets_the_sdks_error_and_nothing_of_ours() -> None:
    frames = conversation([encoded(initialize(4, "2025-06-18", clientInfo={"name": 5}))])
    answers = [f for f in frames if f.get("id") == 4]
    assert len(answers) == 1 and "error" in answers[0]


def test_the_bytes_read_first_come_back_line_by_line() -> None:
    rest = io.BytesIO(b"nd\nthird\n")
    reader = PrefixedReader(b"first\nseco", rest)
    assert list(reader) == [b"first\n", b"second\n", b"third\n"]
    assert list(PrefixedReader(b"", io.BytesIO(b"a\nb"))) == [b"a\n", b"b"]
