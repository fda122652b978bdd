"""One JSON line per tool call: when, which tool, how it ended, how long it took, its trace id
and the sha256 of its arguments and result (hashes, so the log holds no flow data)."""

from __future__ import annotations

import hashlib
import json
import threading
from datetime import UTC, datetime
from typing import Any, TextIO


def digest(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class AuditLog:
    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self._lock = threading.Lock()

    def record(
        self,
        *,
        tool: str,
        outcome: str,
        duration_ms: float,
        trace_id: str,
        arguments: Any,
        result: Any,
    ) -> None:
        line = json.dumps(
            {
                "time": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
                "tool": tool,
                "outcome": outcome,
                "duration_ms": round(duration_ms, 3),
                "trace_id": trace_id,
                "arguments_sha256": digest(arguments),
                "result_sha256": digest(result),
            },
            separators=(",", ":"),
        )
        with self._lock:
            self.stream.write(line + "\n")
            self.stream.flush()
