"""JSON-RPC 2.0 framing on stdin, checked before the SDK sees a line: every message that has
an id gets an answer, and a line that cannot be read at all gets a parse error with id null
(the SDK alone drops such lines silently, leaving a client waiting for ever)."""

from __future__ import annotations

import json
import math
from collections.abc import AsyncIterator
from typing import Any, BinaryIO

import anyio
import attrs
import mcp_types as types
from mcp.shared.message import SessionMessage

MAX_SHOWN = 200
"""How much of a bad value an error message repeats."""
MAX_FRAME = 8 << 20
"""The longest line (one JSON-RPC message) read: a tool call is a few hundred bytes, and a
line of 800 MB held whole would end the server. Longer lines are read past, in pieces of
this size, and answered with one error."""
TOO_LARGE = (
    f"invalid request: a message of over {MAX_FRAME >> 20} MiB; cpg-mcp reads at most "
    f"{MAX_FRAME >> 20} MiB per line"
)
_BEFORE_INITIALIZE = frozenset({"initialize", "ping"})


@attrs.frozen
class Frame:
    """A line's verdict: ``text`` to hand to the SDK, or the error to answer with."""

    text: str | None = None
    method: str | None = None
    error: types.JSONRPCError | None = None


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= MAX_SHOWN else text[:MAX_SHOWN] + "…"


def _error(message_id: int | str | None, code: int, message: str) -> Frame:
    return Frame(
        error=types.JSONRPCError(
            jsonrpc="2.0", id=message_id, error=types.ErrorData(code=code, message=message)
        )
    )


def _usable_id(value: object) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return True
    return isinstance(value, str)


def check_frame(raw: bytes, initialized: bool) -> Frame | None:
    """What to do with one line from stdin (None: a blank line, ignored)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return _error(None, types.PARSE_ERROR, f"parse error: not UTF-8 ({exc.reason})")
    if not text.strip(" \t\r\n"):  # JSON's own whitespace only
        return None
    try:
        message = json.loads(text, parse_constant=_no_constant)
    except (ValueError, RecursionError) as exc:
        return _error(None, types.PARSE_ERROR, f"parse error: not JSON ({_shown(str(exc))})")
    if isinstance(message, list):
        return _error(
            None,
            types.INVALID_REQUEST,
            "invalid request: batches are not supported; send one JSON-RPC object per line",
        )
    if not isinstance(message, dict):
        return _error(None, types.INVALID_REQUEST, "invalid request: not a JSON-RPC object")
    bad_id = _id_problem(message)
    if bad_id is not None:
        return bad_id
    message_id = message.get("id")
    answer = message_id is not None

    def refuse(code: int, why: str) -> Frame | None:
        return _error(message_id, code, why) if answer else Frame()  # notifications: dropped

    if message.get("jsonrpc") != "2.0":
        return refuse(
            types.INVALID_REQUEST,
            f'invalid request: jsonrpc must be "2.0", got {_shown(message.get("jsonrpc"))}',
        )
    method = message.get("method")
    if "method" in message:
        problem = _method_problem(message, initialized or not answer)
        if problem is not None:
            return refuse(*problem)
    try:
        types.jsonrpc_message_adapter.validate_json(text, by_name=False)
    except ValueError as exc:
        first = str(exc).splitlines()[0] if str(exc) else "not a JSON-RPC message"
        return refuse(types.INVALID_REQUEST, f"invalid request: {_shown(first)}")
    return Frame(text=text, method=method if isinstance(method, str) else None)


def _id_problem(message: dict[str, Any]) -> Frame | None:
    """The error for an id no answer can carry (null, a float, an object)."""
    if "id" not in message:
        return None
    raw_id = message["id"]
    if raw_id is None:  # neither a request one can answer nor a notification
        return _error(
            None,
            types.INVALID_REQUEST,
            "invalid request: id is null; give a string or an integer, or leave id out for a "
            "notification",
        )
    if _usable_id(raw_id):
        return None
    if isinstance(raw_id, float) and not math.isfinite(raw_id):
        why = "not a finite number"
    else:
        why = "must be a string or an integer"
    return _error(None, types.INVALID_REQUEST, f"invalid request: id {_shown(raw_id)} {why}")


def _method_problem(message: dict[str, Any], may_call: bool) -> tuple[int, str] | None:
    """(code, message) when a request's method or params are not what JSON-RPC allows, or
    it is a request other than initialize that came first (``may_call`` False)."""
    method = message.get("method")
    if not isinstance(method, str) or not method:
        return types.INVALID_REQUEST, "invalid request: method must be a string"
    params = message.get("params")
    if "params" in message and params is not None and not isinstance(params, dict):
        return (
            types.INVALID_PARAMS,
            f"invalid params for {_shown(method)}: params must be an object",
        )
    if not may_call and method not in _BEFORE_INITIALIZE:
        return types.INVALID_REQUEST, f"{_shown(method)} before initialize: send initialize first"
    return None


def _no_constant(name: str) -> float:
    raise ValueError(f"{name} is not JSON")


class FramedStdin:
    """The SDK's stdin: good lines pass; every other line is answered here, through the
    same write stream the server answers on (so frames never interleave)."""

    def __init__(self, raw: BinaryIO) -> None:
        self._raw = raw
        self._write: Any = None
        self._attached = anyio.Event()
        self.initialized = False

    def attach(self, write_stream: Any) -> None:
        self._write = write_stream
        self._attached.set()

    def __aiter__(self) -> AsyncIterator[str]:
        return self._lines()

    async def _lines(self) -> AsyncIterator[str]:
        await self._attached.wait()
        while True:
            raw = await anyio.to_thread.run_sync(self._raw.readline, MAX_FRAME + 1)
            if not raw:
                return
            if len(raw) > MAX_FRAME:
                await self._skip_rest(raw)
                too_large = types.ErrorData(code=types.INVALID_REQUEST, message=TOO_LARGE)
                refusal = types.JSONRPCError(jsonrpc="2.0", id=None, error=too_large)
                await self._write.send(SessionMessage(refusal))
                continue
            frame = check_frame(raw, self.initialized)
            if frame is None:
                continue
            if frame.error is not None:
                await self._write.send(SessionMessage(frame.error))
                continue
            if frame.text is None:
                continue  # a bad notification: nobody waits for an answer
            if frame.method == "initialize":
                self.initialized = True
            yield frame.text

    async def _skip_rest(self, piece: bytes) -> None:
        """Read past the rest of an over-long line, a piece at a time (none of it kept)."""
        while piece and not piece.endswith(b"\n"):
            piece = await anyio.to_thread.run_sync(self._raw.readline, MAX_FRAME)
