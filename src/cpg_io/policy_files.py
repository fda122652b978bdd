"""Reading folders of Cilium policy YAML (what cpg wrote, a pull request, ``kubectl get -o
yaml`` output): every CiliumNetworkPolicy and CiliumClusterwideNetworkPolicy, lists included."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from cpg_core import Setting
from cpg_core.cilium import PolicyShapeProblem, YamlInputError, load_all, policies_in
from cpg_io.errors import Cancelled, PolicyLoadError
from cpg_io.store import RefusedFile, read_bounded

MAX_FILE_BYTES = 16 * 1024 * 1024
"""A policy file larger than this is refused (a folder from a pull request is untrusted)."""


@attrs.frozen
class PolicyFolder:
    """What a folder of policy YAML holds: each usable file's text and policies, and a line
    for each file that could not be used (the others are still read)."""

    files: list[tuple[str, list[dict[str, Any]]]]
    problems: list[str]
    paths: list[Path] = attrs.Factory(list)
    """Each usable file's path, in the order of ``files``."""


def read_policy_folder(
    folder: Path, cancel: threading.Event | None = None, setting: str = "output_dir"
) -> PolicyFolder:
    """Each YAML file under ``folder`` (or that one file). Only regular files inside the
    folder are read, each up to MAX_FILE_BYTES: a symlink that leaves the folder, a device or
    a FIFO, an oversized file, bad YAML or a field of the wrong type is a problem naming the
    file, never a crash or an unbounded read."""
    if folder.is_file():
        root, paths = folder.parent, [folder]
    elif folder.is_dir():
        root, paths = folder, sorted([*folder.rglob("*.yaml"), *folder.rglob("*.yml")])
    else:
        if setting == "output_dir":
            raise PolicyLoadError(
                f"{folder}: not a folder of policies; give the ",
                Setting("output_dir"),
                " the policies were written to",
            )
        raise PolicyLoadError(
            f"{folder}: no such folder or file of policies; check ", Setting(setting)
        )
    files: list[tuple[str, list[dict[str, Any]]]] = []
    found_paths: list[Path] = []
    problems: list[str] = []
    inside = root.resolve()
    for path in paths:
        if cancel is not None and cancel.is_set():
            raise Cancelled("the reading was cancelled")
        try:
            text = read_bounded(path, MAX_FILE_BYTES, inside).decode("utf-8")
            docs = load_all(text, str(path))
            files.append((text, [p for doc in docs for p in policies_in(doc)]))
            found_paths.append(path)
        except RefusedFile as exc:
            problems.append(str(exc))
        except (OSError, UnicodeDecodeError) as exc:
            problems.append(f"{path}: cannot read it as YAML ({exc})")
        except YamlInputError as exc:
            problems.append(str(exc))
        except PolicyShapeProblem as exc:
            problems.append(f"{path}: not a usable Cilium policy: {exc}")
    return PolicyFolder(files, problems, found_paths)


def load_policies(folder: Path, setting: str = "output_dir") -> list[dict[str, Any]]:
    """Every CiliumNetworkPolicy and CiliumClusterwideNetworkPolicy in the YAML files under
    ``folder`` (or in that one file), lists included. PolicyLoadError lists every file that
    could not be used: a check on part of a folder would be a wrong answer."""
    return [policy for _text, found in load_policy_files(folder, setting) for policy in found]


def load_policies_and_files(
    folder: Path, setting: str = "output_dir"
) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """:func:`load_policies`, and each policy's file by ``namespace/name`` (``name`` for a
    cluster-wide one) as a command line names it (the folder as given)."""
    read = _usable(read_policy_folder(folder, setting=setting))
    policies: list[dict[str, Any]] = []
    files: dict[str, str] = {}
    for (_text, found), path in zip(read.files, read.paths, strict=True):
        for policy in found:
            policies.append(policy)
            metadata = policy.get("metadata") if isinstance(policy, Mapping) else None
            if isinstance(metadata, Mapping):
                clusterwide = policy.get("kind") == "CiliumClusterwideNetworkPolicy"
                namespace = "" if clusterwide else metadata.get("namespace")
                key = f"{namespace or ''}/{metadata.get('name', '')}".lstrip("/")
                files.setdefault(key, str(path))
    return policies, files


def _usable(read: PolicyFolder) -> PolicyFolder:
    """The folder read, or PolicyLoadError listing every file that could not be used."""
    if read.problems:
        shown = "; ".join(read.problems[:5])
        more = f" (and {len(read.problems) - 5} more)" if len(read.problems) > 5 else ""
        raise PolicyLoadError(shown + more)
    return read


def load_policy_files(
    folder: Path, setting: str = "output_dir"
) -> list[tuple[str, list[dict[str, Any]]]]:
    """Each YAML file under ``folder``: its text and its Cilium policies; PolicyLoadError
    listing every file that could not be used."""
    return _usable(read_policy_folder(folder, setting=setting)).files
