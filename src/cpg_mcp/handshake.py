"""``initialize`` answered before the MCP SDK is loaded.

Loading the SDK takes about half a second (two protocol revisions of pydantic models), and an
agent host waits for the handshake before it shows the server. The handshake's answer does
not depend on anything the SDK computes: the server's name, version and instructions, its
capabilities, and the protocol revision (the client's when the SDK speaks it, else the
newest). So ``cpg-mcp`` reads the first frame itself, answers a well-formed ``initialize``
at once, then loads the SDK and hands it the same frame, dropping the SDK's own answer:
the session's state is what it would have been, and the client saw the answer 0.5 s
sooner. ``tests/mcp/test_handshake.py`` holds this answer to the SDK's, byte for value,
for every revision. Only the standard library here: importing it must cost nothing."""

from __future__ import annotations

import json
import os
from typing import Any, BinaryIO

SERVER_NAME = "cpg-mcp"
INSTRUCTIONS = (
    "cpg turns Hubble flow denials into least-privilege CiliumNetworkPolicies. Start one "
    "session (a live capture, or a replay of an allowed capture file), poll get_status, "
    "read list_policies/get_policy/get_evidence, stop_session, then get_cluster_health. "
    "Nothing here writes to a cluster; applying policies is a human's job."
)
HANDSHAKE_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
"""The protocol revisions the SDK negotiates with ``initialize`` (newest last): a client's
offer among them is echoed, any other gets the newest."""
CAPABILITIES: dict[str, Any] = {
    "prompts": {"listChanged": False},
    "resources": {"listChanged": False, "subscribe": False},
    "tools": {"listChanged": False},
}
FIRST_FRAME_LIMIT = 1 << 20
"""Bytes read looking for the first frame's end; a longer first line is left to the SDK's
framing (which refuses it)."""


class FirstFrame:
    """What was read of stdin before the SDK: the bytes (handed to it first) and, when they
    began with an ``initialize`` cpg answered, that request's id."""

    __slots__ = ("answered", "data")

    def __init__(self, data: bytes, answered: int | str | None) -> None:
        self.data = data
        self.answered = answered


def answer_first_frame(version: str, stdin: int = 0, stdout: int = 1) -> FirstFrame:
    """Read the first line of ``stdin`` (a file descriptor) and answer it on ``stdout`` when
    it is a well-formed ``initialize``."""
    data = _first_line(stdin)
    line, newline, _ = data.partition(b"\n")
    answer = initialize_answer(line, version) if newline else None
    if answer is None:
        return FirstFrame(data, None)
    request_id, frame = answer
    view = memoryview(frame)
    while view:
        view = view[os.write(stdout, view) :]
    return FirstFrame(data, request_id)


def _first_line(fd: int) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while size < FIRST_FRAME_LIMIT:
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
        if b"\n" in chunk:
            break
    return b"".join(chunks)


def initialize_answer(line: bytes, version: str) -> tuple[int | str, bytes] | None:
    """The answer to ``line`` when it is an ``initialize`` request the SDK would accept (its
    id, and the frame with its newline); None for anything else, which the SDK answers."""
    try:
        request = json.loads(line)
    except ValueError:
        return None
    if not isinstance(request, dict) or request.get("jsonrpc") != "2.0":
        return None
    request_id = request.get("id")
    params = request.get("params")
    if (
        request.get("method") != "initialize"
        or isinstance(request_id, bool)
        or not isinstance(request_id, int | str)
        or not isinstance(params, dict)
        or not _well_formed(params)
    ):
        return None
    offered = params["protocolVersion"]
    result = {
        "capabilities": CAPABILITIES,
        "instructions": INSTRUCTIONS,
        "protocolVersion": offered if offered in HANDSHAKE_VERSIONS else HANDSHAKE_VERSIONS[-1],
        "serverInfo": {"name": SERVER_NAME, "version": version},
    }
    frame = {"jsonrpc": "2.0", "id": request_id, "result": result}
    return request_id, json.dumps(frame, separators=(",", ":")).encode() + b"\n"


def _well_formed(params: dict[str, Any]) -> bool:
    """The fields the SDK requires of ``initialize`` params, of the types it requires; a
    request it might refuse is left for it to answer."""
    info = params.get("clientInfo")
    return (
        isinstance(params.get("protocolVersion"), str)
        and isinstance(params.get("capabilities"), dict)
        and isinstance(info, dict)
        and isinstance(info.get("name"), str)
        and isinstance(info.get("version"), str)
        and set(params) <= {"protocolVersion", "capabilities", "clientInfo", "_meta"}
        and set(info) <= {"name", "version", "title"}
        and all(isinstance(v, str) for v in info.values())
    )


class PrefixedReader:
    """A binary stdin whose first bytes were read already: ``readline`` gives those first,
    then the rest of the stream, line by line."""

    def __init__(self, prefix: bytes, rest: BinaryIO) -> None:
        self._prefix = prefix
        self._rest = rest

    def readline(self, size: int = -1) -> bytes:
        if self._prefix:
            line, newline, after = self._prefix.partition(b"\n")
            if newline:
                self._prefix = after
                return line + newline
            self._prefix = b""
            if 0 <= size <= len(line):
                return line
            return line + self._rest.readline(size - len(line) if size >= 0 else -1)
        return self._rest.readline(size)

    def __iter__(self) -> PrefixedReader:
        return self

    def __next__(self) -> bytes:
        line = self.readline()
        if not line:
            raise StopIteration
        return line
