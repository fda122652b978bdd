"""The rules every tool call passes through: unknown tools and arguments are refused with what is
allowed, each call has a deadline, errors carry a trace id that the stderr log repeats, results
are stripped of control characters once more, and each call leaves one audit line."""

from __future__ import annotations

import inspect
import json
import logging
import secrets
import sys
import time
from typing import Any

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.context import Context
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS, CallToolResult, TextContent, Tool
from pydantic import ValidationError

from cpg_core.text import clean, shown
from cpg_mcp.audit import AuditLog
from cpg_mcp.framing import FramedStdin
from cpg_mcp.handshake import FirstFrame, PrefixedReader

log = logging.getLogger("cpg.mcp")
MAX_MESSAGE = 1000


def new_trace_id() -> str:
    return secrets.token_hex(4)


class GuardedServer(MCPServer):
    def __init__(
        self, *args: Any, tool_timeout: float, audit: AuditLog | None, **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self.tool_timeout = tool_timeout
        self.audit = audit
        self._allowed: dict[str, tuple[str, ...]] | None = None
        self.sessions: Any = None
        """The SessionManager (``main`` waits for its clean-up on a signal)."""

    async def run_stdio_async(self, first: FirstFrame | None = None) -> None:
        """The SDK's stdio transport, with every stdin line checked first (``framing``).
        ``first``: what ``cpg_mcp.handshake`` read of stdin before the SDK was loaded (read
        again here first); when it answered that ``initialize``, the SDK's answer is dropped."""
        raw: Any = sys.stdin.buffer
        if first is not None:
            raw = PrefixedReader(first.data, raw)
        stdin = FramedStdin(raw)
        async with stdio_server(stdin=stdin) as (read_stream, write_stream):  # type: ignore[arg-type]
            stdin.attach(write_stream)
            out: Any = write_stream
            if first is not None and first.answered is not None:
                out = _AnsweredOnce(write_stream, first.answered)
            await self._lowlevel_server.run(
                read_stream, out, self._lowlevel_server.create_initialization_options()
            )

    async def list_tools(self) -> list[Tool]:
        """Input schemas say what the guard enforces: no argument beyond those listed; the
        descriptions are the tools' docstrings without their source indentation."""
        return [
            tool.model_copy(
                update={
                    "input_schema": {**tool.input_schema, "additionalProperties": False},
                    "description": inspect.cleandoc(tool.description or "") or None,
                }
            )
            for tool in await super().list_tools()
        ]

    async def _allowed_arguments(self, name: str) -> tuple[str, ...] | None:
        if self._allowed is None:
            self._allowed = {
                tool.name: tuple((tool.input_schema.get("properties") or {}).keys())
                for tool in await super().list_tools()
            }
        return self._allowed.get(name)

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> Any:
        trace = new_trace_id()
        began = time.perf_counter()
        outcome = "ok"
        result_doc: Any = None
        try:
            allowed = await self._allowed_arguments(name)
            if allowed is None:
                outcome = "unknown_tool"
                raise MCPError(INVALID_PARAMS, f"unknown tool {shown(name)} (trace {trace})")
            unknown = sorted(set(arguments) - set(allowed))
            if unknown:
                outcome = "rejected"
                raise ToolError(
                    f"unknown argument{'s' if len(unknown) > 1 else ''} "
                    f"{', '.join(map(shown, unknown[:10]))} for {name}; allowed: "
                    f"{', '.join(allowed) or 'none'}"
                )
            try:
                with anyio.fail_after(self.tool_timeout):
                    result = await super().call_tool(name, arguments, context)
            except TimeoutError:
                outcome = "timeout"
                raise ToolError(
                    f"{name} did not finish within {self.tool_timeout:g}s; narrow the query "
                    "(filters, a smaller limit) or retry (the operator sets the deadline with "
                    "--tool-timeout)"
                ) from None
            if isinstance(result, CallToolResult):
                result = _sanitized(result)
                result_doc = result.model_dump(mode="json", by_alias=True, exclude_none=True)
            return result
        except UnexpectedToolError:
            outcome = "crashed"
            log.exception("trace %s: %s crashed", trace, name)
            result_doc = "crashed"
            raise ToolError(
                f"{name} failed unexpectedly (trace {trace}); the cpg-mcp log on stderr has "
                "the details"
            ) from None
        except ToolError as exc:
            if outcome == "ok":
                outcome = "error"
            message = clean(_readable(name, exc))
            if len(message) > MAX_MESSAGE:  # whatever a message repeats, it stays readable
                message = message[:MAX_MESSAGE] + "…"
            log.warning("trace %s: %s: %s", trace, name, message)
            result_doc = message
            raise ToolError(f"{message} (trace {trace})") from exc.__cause__
        except MCPError as exc:
            if outcome == "ok":
                outcome = "error"
            log.warning("trace %s: %s: %s", trace, name, clean(exc.message))
            result_doc = exc.message
            raise
        finally:
            if self.audit is not None:
                self.audit.record(
                    tool=clean(name),
                    outcome=outcome,
                    duration_ms=(time.perf_counter() - began) * 1000,
                    trace_id=trace,
                    arguments=arguments,
                    result=result_doc,
                )


def _readable(name: str, exc: ToolError) -> str:
    """The tool's own message, without the SDK's ``Error executing tool`` wrapper; argument
    validation as ``field: problem`` pairs."""
    cause = exc.__cause__
    if isinstance(cause, ToolError):
        return str(cause)
    if isinstance(cause, ValidationError):
        problems = "; ".join(
            f"{'.'.join(str(part) for part in err['loc'])}: {err['msg']}" for err in cause.errors()
        )
        return f"invalid arguments for {name}: {problems}"
    return str(exc)


def _without_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(v) for v in value]
    return value


def _sanitized(result: CallToolResult) -> CallToolResult:
    """A safety net behind each tool's own cleaning: no control character leaves, even in a
    field a tool forgot. Unset optional keys are left out rather than sent as null. The text
    block is rebuilt from the cleaned structured content."""
    structured = result.structured_content
    if structured is None:
        return result
    cleaned = clean(_without_nulls(structured), keep_newlines=True)
    if cleaned == structured:
        return result
    text = json.dumps(cleaned, ensure_ascii=False, separators=(",", ":"))
    return result.model_copy(
        update={"structured_content": cleaned, "content": [TextContent(type="text", text=text)]}
    )


class _AnsweredOnce:
    """The server's write stream, without its answer to the ``initialize`` cpg-mcp answered
    before the SDK was loaded (``cpg_mcp.handshake``): the client must see one answer."""

    def __init__(self, inner: Any, request_id: int | str) -> None:
        self._inner = inner
        self._id = request_id
        self._dropped = False

    async def send(self, item: Any, /) -> None:
        message = getattr(item, "message", None)
        if not self._dropped and getattr(message, "id", None) == self._id:
            self._dropped = True
            error = getattr(message, "error", None)
            if error is not None:
                log.warning("the SDK refused the initialize answered early: %s", error)
            return
        await self._inner.send(item)

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> _AnsweredOnce:
        await self._inner.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> bool | None:
        result: bool | None = await self._inner.__aexit__(*exc)
        return result
