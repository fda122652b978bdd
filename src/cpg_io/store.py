"""Atomic file writes and the policy store ``<output-dir>/<namespace>/<workload>.yaml``.

A reader never sees a partial file: text goes to a temp file in the same folder, is fsynced,
then renamed over the target. A file whose content would not change is not touched at all.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import threading
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from enum import StrEnum
from pathlib import Path

from cpg_core.names import path_component_problem


class WriteOutcome(StrEnum):
    CREATED = "created"
    UPDATED = "updated"
    UNCHANGED = "unchanged"


class StoreError(Exception):
    """A path or a write was refused; the message names the path and the fix."""


def atomic_write_text(path: Path, text: str, mode: int = 0o644, *, sync_dir: bool = True) -> None:
    """Write ``text`` so that readers see the old file or the new one, never a mix. With
    ``sync_dir=False`` the caller fsyncs the folder itself (see :func:`fsync_dirs`)."""
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
    if sync_dir:
        fsync_dirs([path.parent])


def fsync_dirs(folders: Iterable[Path]) -> None:
    """Make renames in these folders durable (once per folder, however many files moved)."""
    for folder in sorted(set(folders)):
        dir_fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


class StagedWrites:
    """Many files replaced as one batch: each goes to a temp file beside its target; at commit
    all temp files are fsynced concurrently (so they share journal commits), then renamed into
    place, then each folder is fsynced once. Readers never see a partial file, and a crash
    before the renames leaves every old file as it was."""

    def __init__(self) -> None:
        self._staged: list[tuple[str, Path]] = []
        self._lock = threading.Lock()

    def stage(self, path: Path, text: str, mode: int = 0o644) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(text.encode("utf-8"))
                os.fchmod(handle.fileno(), mode)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            raise
        with self._lock:
            self._staged.append((tmp, path))

    def take(self) -> list[tuple[str, Path]]:
        """Hand the staged files over (to another process's batch); this batch forgets them."""
        with self._lock:
            staged, self._staged = self._staged, []
        return staged

    def adopt(self, staged: list[tuple[str, Path]]) -> None:
        with self._lock:
            self._staged.extend(staged)

    def commit(self) -> None:
        with self._lock:
            staged, self._staged = self._staged, []
        if not staged:
            return
        with ThreadPoolExecutor(16) as pool:  # concurrent fsyncs share journal commits
            list(pool.map(_fsync_path, (tmp for tmp, _ in staged)))
        for tmp, path in staged:
            os.replace(tmp, path)
        fsync_dirs(path.parent for _, path in staged)

    def abort(self) -> None:
        with self._lock:
            staged, self._staged = self._staged, []
        for tmp, _ in staged:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)


def _fsync_path(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def safe_component(value: str, what: str) -> str:
    problem = path_component_problem(value)
    if problem is not None:
        raise StoreError(f"refusing to use {what} {value!r} as a file name: it {problem}")
    return value


class PolicyStore:
    """Policies on disk, one YAML file per (namespace, workload). Writes are staged in
    ``batch`` when one is given (then visible after its commit), else written at once."""

    def __init__(self, root: Path, batch: StagedWrites | None = None) -> None:
        self.root = root
        self.batch = batch

    def path_for(self, namespace: str, workload: str) -> Path:
        return (
            self.root
            / safe_component(namespace, "namespace")
            / (safe_component(workload, "workload") + ".yaml")
        )

    def targets(self) -> Iterator[tuple[str, str]]:
        """(namespace, workload) of every policy file, sorted."""
        if not self.root.is_dir():
            return
        for ns_dir in sorted(p for p in self.root.iterdir() if p.is_dir()):
            for path in sorted(ns_dir.glob("*.yaml")):
                yield ns_dir.name, path.stem

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
            if self.batch is not None:
                self.batch.stage(path, text)
            else:
                atomic_write_text(path, text)
        except OSError as exc:
            raise StoreError(f"{path}: could not write ({exc.strerror or exc})") from None
        return WriteOutcome.CREATED if existing is None else WriteOutcome.UPDATED
