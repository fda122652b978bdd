"""Atomic file writes and the policy store ``<output-dir>/<namespace>/<workload>.yaml``.

A reader never sees a partial file: text goes to a temp file in the same folder, is fsynced,
then renamed over the target. A file whose content would not change is not touched at all.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from enum import StrEnum
from pathlib import Path

from cpg_core.names import path_component_problem


class WriteOutcome(StrEnum):
    CREATED = "created"
    UPDATED = "updated"
    UNCHANGED = "unchanged"


class StoreError(Exception):
    """A path or a write was refused; the message names the path and the fix."""


def atomic_write_text(path: Path, text: str, mode: int = 0o644) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(text.encode("utf-8"))
            handle.flush()
            os.fsync(handle.fileno())
            os.fchmod(handle.fileno(), mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def safe_component(value: str, what: str) -> str:
    problem = path_component_problem(value)
    if problem is not None:
        raise StoreError(f"refusing to use {what} {value!r} as a file name: it {problem}")
    return value


class PolicyStore:
    """Policies on disk, one YAML file per (namespace, workload)."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def path_for(self, namespace: str, workload: str) -> Path:
        return (
            self.root
            / safe_component(namespace, "namespace")
            / (safe_component(workload, "workload") + ".yaml")
        )

    def read(self, path: Path) -> str | None:
        try:
            return path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        except UnicodeDecodeError:
            raise StoreError(f"{path}: not UTF-8 text; move it aside and run again") from None

    def write(self, path: Path, text: str, existing: str | None) -> WriteOutcome:
        if existing == text:
            return WriteOutcome.UNCHANGED
        try:
            atomic_write_text(path, text)
        except OSError as exc:
            raise StoreError(f"{path}: could not write ({exc.strerror or exc})") from None
        return WriteOutcome.CREATED if existing is None else WriteOutcome.UPDATED
