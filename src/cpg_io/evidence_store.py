"""Evidence on disk: ``<evidence-dir>/<hash>/<namespace>/<workload>.json``, where hash is the
first 12 hex digits of sha256 of the absolute output directory (so two output dirs never share
evidence, and ``cpg explain`` finds it from the same ``-o``)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

from cpg_core.evidence import parse_evidence, render_evidence
from cpg_io.store import StagedWrites, StoreError, atomic_write_text, safe_component


def default_evidence_root() -> Path:
    """``$XDG_CACHE_HOME/cpg/evidence``, else ``~/.cache/cpg/evidence``."""
    cache = os.environ.get("XDG_CACHE_HOME")
    if cache:
        return Path(cache) / "cpg" / "evidence"
    try:
        home = Path.home()
    except RuntimeError:
        raise StoreError(
            "cannot find a home directory for the evidence cache; pass --evidence-dir DIR "
            "(or --no-evidence)"
        ) from None
    return home / ".cache" / "cpg" / "evidence"


def output_hash(output_dir: Path) -> str:
    absolute = os.path.abspath(os.fspath(output_dir))
    return hashlib.sha256(absolute.encode("utf-8")).hexdigest()[:12]


class EvidenceStore:
    def __init__(self, root: Path, output_dir: Path, batch: StagedWrites | None = None) -> None:
        self.root = root
        self.output_dir = Path(os.path.abspath(os.fspath(output_dir)))
        self.base = root / output_hash(output_dir)
        self.batch = batch

    def path_for(self, namespace: str, workload: str) -> Path:
        return (
            self.base
            / safe_component(namespace, "namespace")
            / (safe_component(workload, "workload") + ".json")
        )

    def read(self, namespace: str, workload: str) -> dict[str, Any] | None:
        path = self.path_for(namespace, workload)
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        return parse_evidence(text, str(path))

    def write(self, namespace: str, workload: str, doc: dict[str, Any]) -> Path:
        path = self.path_for(namespace, workload)
        try:
            if self.batch is not None:
                self.batch.stage(path, render_evidence(doc))
            else:
                atomic_write_text(path, render_evidence(doc))
        except OSError as exc:
            raise StoreError(f"{path}: could not write evidence ({exc.strerror or exc})") from None
        return path
