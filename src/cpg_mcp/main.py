"""``cpg-mcp``: serve the tools over stdio. stdout carries JSON-RPC frames only; logs go to
stderr (configured before the server starts). stdin EOF, SIGTERM or SIGINT stop the session,
remove its temp dir and exit."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
from pathlib import Path
from typing import NoReturn

from cpg_mcp import handshake


def _positive_seconds(text: str) -> float:
    try:
        seconds = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 0 < seconds <= 3600:
        raise argparse.ArgumentTypeError(f"{text!r} must be more than 0 and at most 3600")
    return seconds


class _Parser(argparse.ArgumentParser):
    """cpg-mcp's flags, with help and errors laid out as every ``cpg`` command shows them."""

    def format_help(self) -> str:
        from typer._click.formatting import HelpFormatter  # the formatter cpg's commands use

        formatter = HelpFormatter()
        formatter.write_usage(self.prog, "[OPTIONS]")
        if self.description:
            formatter.write_paragraph()
            with formatter.indentation():
                formatter.write_text(self.description)
        rows = []
        for action in self._actions:
            names = ", ".join(action.option_strings)
            if action.metavar:
                names += f" {action.metavar}"
            elif action.choices:
                names += f" [{'|'.join(str(c) for c in action.choices)}]"
            rows.append((names, action.help or ""))
        with formatter.section("Options"):
            formatter.write_dl(rows)
        return formatter.getvalue()

    def error(self, message: str) -> NoReturn:
        sys.stderr.write(
            f"Usage: {self.prog} [OPTIONS]\nTry '{self.prog} -h' for help.\n\nError: {message}\n"
        )
        raise SystemExit(2)


def _version() -> str:
    from cpg_io.version import cpg_version

    return cpg_version()


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = _Parser(
        prog="cpg-mcp",
        description="Read-only MCP stdio server for cpg: capture sessions, generated policies, "
        "their evidence and cluster health, for LLM agents. Applying policies stays a human act.",
        add_help=False,
    )
    parser.add_argument(
        "--allow-replay-dir",
        type=Path,
        metavar="DIR",
        help="Let start_session replay capture files (and shadow proposed policies) from "
        "inside DIR. Off by default.",
    )
    parser.add_argument(
        "--allow-tls-dir",
        type=Path,
        metavar="DIR",
        help="Let start_session's tls_ca_cert, tls_client_cert and tls_client_key name files "
        "inside DIR (the relay's certificates). Off by default: no client names a host path.",
    )
    parser.add_argument(
        "--tool-timeout",
        type=_positive_seconds,
        default=30.0,
        metavar="SECONDS",
        help="Deadline for every tool call; a late call ends in a readable error.  [default: 30]",
    )
    parser.add_argument(
        "--audit-log",
        type=Path,
        metavar="FILE",
        help="Append one JSON line per tool call (time, tool, outcome, duration, trace id, "
        "sha256 of arguments and result) to FILE instead of stderr.",
    )
    parser.add_argument(
        "--log-level",
        default="warning",
        choices=("debug", "info", "warning", "error"),
        help="Stderr log level.  [default: warning]",
    )
    parser.add_argument("-h", "--help", action="help", help="Show this message and exit.")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    logging.basicConfig(
        stream=sys.stderr,
        level=getattr(logging, args.log_level.upper()),
        format="cpg-mcp: %(levelname)s: %(message)s",
        force=True,
    )
    logging.getLogger("grpc").setLevel(logging.CRITICAL)  # its tracebacks: one line of ours
    for flag, folder in (
        ("--allow-replay-dir", args.allow_replay_dir),
        ("--allow-tls-dir", args.allow_tls_dir),
    ):
        if folder is not None and not folder.is_dir():
            sys.stderr.write(f"cpg-mcp: error: {flag} {folder} is not a folder\n")
            raise SystemExit(2)
    try:
        audit_stream = (
            open(args.audit_log, "a", encoding="utf-8")  # noqa: SIM115 - lives as long as the process
            if args.audit_log is not None
            else sys.stderr
        )
    except OSError as exc:
        sys.stderr.write(
            f"cpg-mcp: error: --audit-log {args.audit_log}: {exc.strerror or exc}; "
            "give a writable file path\n"
        )
        raise SystemExit(2) from None
    # The handshake first: the SDK and cpg's tools take half a second to load, and the
    # client waits for this answer (cpg_mcp.handshake says why it is the SDK's own).
    first = handshake.answer_first_frame(_version())

    import anyio

    from cpg_mcp import workers
    from cpg_mcp.audit import AuditLog
    from cpg_mcp.server import build_server

    mcp = build_server(
        args.allow_replay_dir,
        allow_tls_dir=args.allow_tls_dir,
        tool_timeout=args.tool_timeout,
        audit=AuditLog(audit_stream),
    )

    async def serve() -> None:
        async def watch(scope: anyio.CancelScope) -> None:
            with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
                async for _ in signals:
                    scope.cancel()  # unwinds the lifespan: the session stops, its dir goes
                    # The stdin reader thread cannot be cancelled: wait for the session's
                    # clean-up only, then leave.
                    with anyio.CancelScope(shield=True):
                        await anyio.to_thread.run_sync(
                            mcp.sessions.closed.wait, 9, abandon_on_cancel=True
                        )
                    workers.shutdown()
                    logging.shutdown()
                    os._exit(0)  # a parked stdin reader thread must not hold the exit

        async with anyio.create_task_group() as group:
            scope = anyio.CancelScope()
            group.start_soon(watch, scope)
            with scope:
                await mcp.run_stdio_async(first)
            group.cancel_scope.cancel()

    anyio.run(serve)


if __name__ == "__main__":
    main()
