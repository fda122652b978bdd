"""Evidence on disk: ``<evidence-dir>/<hash>/<namespace>/<workload>.json``, where hash is the
first 12 hex digits of sha256 of the absolute output directory (so two output dirs never share
evidence, and ``cpg explain`` finds it from the same ``-o``)."""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import orjson

from cpg_core import (
    ClusterHealth,
    DocumentError,
    EvidenceError,
    PolicyEvidence,
    SessionInfo,
    Setting,
    from_data,
    parse_evidence,
    render_evidence,
    to_json,
)
from cpg_io.errors import Cancelled, StoreError
from cpg_io.store import (
    StagedWrites,
    atomic_write_text,
    inside,
    namespaced_stems,
    read_text,
    safe_component,
)
from cpg_io.version import cpg_version

HEALTH_FILE = "cluster-health.json"
FORMAT_FILE = ".cpg-format"
"""Beside cluster-health.json: the folder's layout (EVIDENCE_FORMAT) and who wrote it, as
JSON (not named ``*.json``: a glob for the evidence documents never meets it)."""
EVIDENCE_FORMAT = 1
"""The layout of an evidence folder as this cpg writes it: 0 is a folder cpg 0.2 wrote (no
mark), read as it is and marked at the first write. A newer one is refused: only the cpg that
wrote it knows what changed (docs/UPGRADING.md)."""


REPO_EVIDENCE = ".cpg-evidence"
"""The evidence folder that travels with the policies: beside the output folder, committed."""


def default_evidence_root(output_dir: Path | None = None) -> Path:
    """``.cpg-evidence`` beside ``output_dir`` when it exists (evidence committed with the
    policies), else ``$XDG_CACHE_HOME/cpg/evidence``, else ``~/.cache/cpg/evidence``."""
    if output_dir is not None:
        beside = Path(os.path.abspath(os.fspath(output_dir))).parent / REPO_EVIDENCE
        if beside.is_dir():
            return beside
    cache = os.environ.get("XDG_CACHE_HOME")
    if cache:
        return Path(cache) / "cpg" / "evidence"
    try:
        home = Path.home()
    except RuntimeError:
        raise StoreError(
            "cannot find a home directory for the evidence cache; give ",
            Setting("evidence_dir"),
            " (or ",
            Setting("no_evidence"),
            ")",
            field="evidence_dir",
        ) from None
    return home / ".cache" / "cpg" / "evidence"


def output_hash(output_dir: Path) -> str:
    absolute = os.path.abspath(os.fspath(output_dir))
    return hashlib.sha256(absolute.encode("utf-8")).hexdigest()[:12]


def evidence_key(root: Path, output_dir: Path) -> str:
    """Where in ``root`` an output folder's evidence lives. In a ``.cpg-evidence`` folder
    (committed in a repository next to ``policies/``), the output folder's path relative to
    the folder holding ``.cpg-evidence``; in any other folder inside the Git work tree that
    also holds the output folder, its path relative to that work tree: a clone at any other
    path finds it either way. Anywhere else (the cache), the hash of the output folder's
    absolute path."""
    if Path(root).name != REPO_EVIDENCE:
        tree = work_tree(Path(root))
        if tree is not None:
            relative = _relative_inside(output_dir, tree)
            if relative is not None and work_tree(Path(output_dir)) == tree:
                return relative
        return output_hash(output_dir)
    parent = os.path.dirname(os.path.abspath(os.fspath(root)))
    relative = os.path.relpath(os.path.abspath(os.fspath(output_dir)), parent)
    inside = not relative.startswith("..") and relative != "." and not os.path.isabs(relative)
    if inside and Path(parent, relative) != Path(os.path.abspath(os.fspath(root))):
        return Path(relative).as_posix()
    return output_hash(output_dir)


def work_tree(path: Path) -> Path | None:
    """The Git work tree ``path`` (or the nearest folder above it that exists) lies in: the
    folder holding ``.git``; None outside any."""
    here = Path(os.path.abspath(os.fspath(path)))
    for folder in (here, *here.parents):
        if (folder / ".git").exists():
            return folder
    return None


def _relative_inside(output_dir: Path, tree: Path) -> str | None:
    relative = os.path.relpath(os.path.abspath(os.fspath(output_dir)), tree)
    if relative.startswith("..") or relative == "." or os.path.isabs(relative):
        return None
    return Path(relative).as_posix()


class EvidenceStore:
    def __init__(self, root: Path, output_dir: Path, batch: StagedWrites | None = None) -> None:
        self.root = root
        self.output_dir = Path(os.path.abspath(os.fspath(output_dir)))
        self.base = root / evidence_key(root, output_dir)
        self.batch = batch
        self._format: int | None = None
        """The folder's format, once checked (this run reads and writes it)."""

    def path_for(self, namespace: str, workload: str) -> Path:
        path = (
            self.base
            / safe_component(namespace, "namespace")
            / (safe_component(workload, "workload") + ".json")
        )
        return inside(self.root, path)

    @property
    def health_path(self) -> Path:
        return self.base / HEALTH_FILE

    @property
    def format_path(self) -> Path:
        return self.base / FORMAT_FILE

    def check_format(self) -> int:
        """The folder's format (0: written by cpg 0.2, before the mark; the same layout).
        A folder a newer cpg wrote is refused before anything is read or written: what it
        holds may mean something this cpg would misread, and a rewrite would lose it."""
        if self._format is not None:
            return self._format
        path = self.format_path
        text = read_text(path, "evidence format", inside=self.base) if self.base.is_dir() else None
        found = 0
        if text is not None:
            try:
                mark = orjson.loads(text)
                found = mark["format"]
                if type(found) is not int or found < 1:
                    raise ValueError(found)
            except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
                raise StoreError(
                    f'{path}: not an evidence format mark (expected {{"format": N}}); '
                    "restore it from a backup, or move the evidence folder aside and run again"
                ) from None
            if found > EVIDENCE_FORMAT:
                writer = mark.get("written_by") or "a newer cpg"
                raise StoreError(
                    f"{self.base}: evidence written by {writer} (format {found}); this cpg "
                    f"{cpg_version()} reads format {EVIDENCE_FORMAT} and older. Upgrade cpg "
                    "(docs/UPGRADING.md), or give another ",
                    Setting("evidence_dir"),
                )
        self._format = found
        return found

    def _mark_format(self) -> None:
        """Mark the folder with this cpg's format, with its first write (a folder of format
        0 needs nothing else: the same files; the mark is one atomic write, in the same batch
        as the documents when there is one)."""
        if self.check_format() == EVIDENCE_FORMAT:
            return
        mark = {"format": EVIDENCE_FORMAT, "written_by": f"cpg {cpg_version()}"}
        self._format = EVIDENCE_FORMAT
        self._write(self.format_path, orjson.dumps(mark).decode() + "\n", "the evidence format")

    def read(
        self, namespace: str, workload: str, resolved: dict[Path, Path] | None = None
    ) -> PolicyEvidence | None:
        self.check_format()
        path = self.path_for(namespace, workload)
        text = read_text(path, "evidence", inside=self.base, resolved=resolved)
        return None if text is None else parse_evidence(text, str(path))

    def targets(self) -> Iterator[tuple[str, str]]:
        """(namespace, workload) of every evidence file, sorted."""
        return namespaced_stems(self.base, "*.json")

    def read_all(
        self, on_error: Callable[[str], None], cancel: threading.Event | None = None
    ) -> Iterator[tuple[str, str, PolicyEvidence]]:
        """Every readable evidence document; each unreadable one is passed to ``on_error``
        (its message names the file) and skipped. Cancelled before the next file once
        ``cancel`` is set."""
        resolved: dict[Path, Path] = {}  # each folder's real path, for this reading only
        try:
            self.check_format()
        except StoreError as exc:
            on_error(str(exc))
            return
        for namespace, workload in self.targets():
            if cancel is not None and cancel.is_set():
                raise Cancelled("the reading was cancelled")
            try:
                doc = self.read(namespace, workload, resolved)
            except (EvidenceError, StoreError, OSError, UnicodeDecodeError) as exc:
                on_error(str(exc))
                continue
            if doc is not None:
                yield namespace, workload, doc

    def replay_sessions(self) -> list[SessionInfo]:
        """Every session recorded here that identified its inputs (by id, once). Only the
        ``sessions`` part of each file is read; a file that cannot be read is skipped here
        (the write that follows reports it)."""
        found: dict[str, SessionInfo] = {}
        for namespace, workload in self.targets():
            path = self.path_for(namespace, workload)
            try:
                doc = orjson.loads(read_text(path, "evidence", inside=self.base) or "{}")
            except (StoreError, OSError, UnicodeDecodeError, orjson.JSONDecodeError):
                continue
            sessions = doc.get("sessions") if isinstance(doc, dict) else None
            for item in sessions if isinstance(sessions, list) else ():
                if not isinstance(item, dict) or not item.get("inputs"):
                    continue
                try:
                    session = from_data(item, SessionInfo, str(path))
                except DocumentError:
                    continue
                found.setdefault(session.id, session)
        return list(found.values())

    def read_health(self) -> ClusterHealth | None:
        """This output dir's cluster-health.json (None when the run wrote none)."""
        self.check_format()
        path = self.health_path
        text = read_text(path, "cluster health", inside=self.base)
        if text is None:
            return None
        try:
            return from_data(orjson.loads(text), ClusterHealth, str(path))
        except (orjson.JSONDecodeError, DocumentError) as exc:
            raise EvidenceError(
                f"{path}: not a cluster-health report ({exc}); delete it and run again"
            ) from None

    def write_health(self, health: ClusterHealth) -> Path:
        return self._write(self.health_path, to_json(health), "cluster health")

    def write(self, namespace: str, workload: str, doc: PolicyEvidence) -> Path:
        return self._write(self.path_for(namespace, workload), render_evidence(doc), "evidence")

    def _write(self, path: Path, text: str, what: str) -> Path:
        try:
            if self.batch is not None:
                self.batch.stage(path, text)
            else:
                atomic_write_text(path, text)
        except OSError as exc:
            raise StoreError(f"{path}: could not write {what} ({exc.strerror or exc})") from None
        self._mark_format()
        return path


def lenient_reader(store: EvidenceStore) -> Callable[[str, str], PolicyEvidence | None]:
    """The store's documents for a question that goes on without one it cannot read (what
    stands behind a rule, said by why, trace and verify): read once each, a broken one is
    none (``cpg explain`` says what is wrong with it)."""
    cache: dict[tuple[str, str], PolicyEvidence | None] = {}

    def read(namespace: str, workload: str) -> PolicyEvidence | None:
        if (namespace, workload) not in cache:
            try:
                cache[(namespace, workload)] = store.read(namespace, workload)
            except (EvidenceError, StoreError, OSError):
                cache[(namespace, workload)] = None
        return cache[(namespace, workload)]

    return read
