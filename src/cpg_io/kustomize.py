"""``--kustomize``: a ``kustomization.yaml`` in each namespace folder listing cpg's policy
files, and one at the top listing the namespace folders, so ``kubectl apply -k policies/``,
Argo CD and Flux pick the policies up. Entries and files a human added are left alone."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from cpg_core.cilium import MANAGED_BY_LABEL, MANAGED_BY_VALUE, YamlInputError, load_one
from cpg_io.errors import StoreError
from cpg_io.store import atomic_write_text

KUSTOMIZATION = "kustomization.yaml"
_MARK = f"{MANAGED_BY_LABEL}: {MANAGED_BY_VALUE}"


def _is_cpg_file(path: Path) -> bool:
    try:
        return _MARK in path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return False


def _existing(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization"}
    try:
        doc = load_one(path.read_text(encoding="utf-8"), str(path))
    except (OSError, UnicodeDecodeError, YamlInputError) as exc:
        raise StoreError(f"{path}: cannot read it ({exc}); fix or remove it") from None
    if not isinstance(doc, dict):
        raise StoreError(f"{path}: not a Kustomization; fix or remove it")
    resources = doc.get("resources")
    if resources is not None and not (
        isinstance(resources, list) and all(isinstance(entry, str) for entry in resources)
    ):
        raise StoreError(
            f"{path}: resources must be a list of file or folder names; fix it (cpg leaves "
            "a file a person wrote as it is)"
        )
    return doc


def _update(path: Path, wanted: list[str], owned: set[str]) -> bool:
    """Resources: the human's entries as they were, then cpg's; cpg's entries that no longer
    exist are dropped. True when the file changed."""
    doc = _existing(path)
    before = list(doc.get("resources") or [])
    kept = [entry for entry in before if entry not in owned or entry in wanted]
    resources = kept + [entry for entry in wanted if entry not in kept]
    if resources == before and path.exists():
        return False
    doc["resources"] = resources
    atomic_write_text(path, yaml.safe_dump(doc, sort_keys=False))
    return True


def update_kustomizations(output_dir: Path) -> list[Path]:
    """Bring the kustomization files of ``output_dir`` up to date; the ones that changed."""
    changed = []
    folders = []
    for folder in sorted(
        p for p in output_dir.iterdir() if p.is_dir() and not p.name.startswith(".")
    ):
        files = sorted(
            p.name
            for p in folder.iterdir()
            if p.suffix in (".yaml", ".yml") and p.name != KUSTOMIZATION and _is_cpg_file(p)
        )
        if not files and not (folder / KUSTOMIZATION).exists():
            continue
        owned = {p.name for p in folder.iterdir() if p.suffix in (".yaml", ".yml")}
        owned = {name for name in owned if name == KUSTOMIZATION or _is_cpg_file(folder / name)}
        # an entry for a cpg file that was removed is cpg's too
        doc = _existing(folder / KUSTOMIZATION)
        owned |= {
            entry
            for entry in doc.get("resources") or []
            if isinstance(entry, str)
            and entry.endswith((".yaml", ".yml"))
            and not (folder / entry).exists()
        }
        if _update(folder / KUSTOMIZATION, files, owned):
            changed.append(folder / KUSTOMIZATION)
        folders.append(folder.name)
    if folders and _update(output_dir / KUSTOMIZATION, folders, set(folders)):
        changed.append(output_dir / KUSTOMIZATION)
    return changed
