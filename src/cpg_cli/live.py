"""Running a live session (generate, shadow, drift) from the terminal: the signals that stop
it, once, for every command. The first Ctrl+C or SIGTERM asks the session to stop (it
flushes and reports); a second leaves at once, after releasing the port-forward and any
credential files."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, TypeVar

T = TypeVar("T")


class LiveSession(Protocol):
    """What every live run hands back: a stop to set, and what it set up to close."""

    @property
    def stop(self) -> asyncio.Event: ...

    def close(self) -> None: ...


def follow(
    session: LiveSession,
    run: Callable[[], Awaitable[T]],
    *,
    on_stop: Callable[[], None] | None = None,
    on_leave: Callable[[], None] | None = None,
) -> T:
    """``run()`` to its end with the signals handled; the session is closed afterwards,
    whatever happened. ``on_stop`` hears the first signal (a progress line notes it),
    ``on_leave`` the second, just before the process leaves (the terminal gets its cursor
    back)."""

    async def main() -> T:
        loop = asyncio.get_running_loop()
        count = 0

        def on_signal() -> None:
            nonlocal count
            count += 1
            if count > 1:
                if on_leave is not None:
                    on_leave()
                session.close()
                os._exit(130)  # a second Ctrl+C: leave now
            if on_stop is not None:
                on_stop()
            session.stop.set()

        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, on_signal)
        return await run()

    try:
        return asyncio.run(main())
    finally:
        session.close()


def leaving(progress: Any) -> Callable[[], None]:
    """The ``on_leave`` of a command that draws a progress line: it is taken down."""
    return lambda: progress.__exit__(None, None, None)
