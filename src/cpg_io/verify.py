"""Reading for ``cpg verify``: policy folders and captures (the checking is in cpg_core)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from cpg_core import DecideOptions, Flow, Setting, VerifyReport, verify_flows
from cpg_core.cilium import YamlInputError, load_all
from cpg_core.reading import time_key
from cpg_io.errors import PolicyLoadError
from cpg_io.sources import CaptureFlows, ReadStats

_KINDS = frozenset({"CiliumNetworkPolicy", "CiliumClusterwideNetworkPolicy"})


def _policies_in(doc: object) -> list[dict[str, Any]]:
    """The Cilium policies of one YAML document: itself, or the items of a ``kind: List``
    (as ``kubectl get cnp,ccnp -A -o yaml`` writes)."""
    if not isinstance(doc, dict):
        return []
    if doc.get("kind") in _KINDS:
        return [doc]
    if doc.get("kind") == "List" or (doc.get("kind") or "").endswith("List"):
        return [item for entry in doc.get("items") or [] for item in _policies_in(entry)]
    return []


def load_policies(folder: Path) -> list[dict[str, Any]]:
    """Every CiliumNetworkPolicy and CiliumClusterwideNetworkPolicy in the YAML files under
    ``folder`` (or in that one file), lists included."""
    return [policy for _text, found in load_policy_files(folder) for policy in found]


def load_policy_files(folder: Path) -> list[tuple[str, list[dict[str, Any]]]]:
    """Each YAML file under ``folder`` (or that one file): its text and its Cilium policies."""
    if folder.is_file():
        paths = [folder]
    elif folder.is_dir():
        paths = sorted([*folder.rglob("*.yaml"), *folder.rglob("*.yml")])
    else:
        raise PolicyLoadError(
            f"{folder}: not a folder of policies; give the ",
            Setting("output_dir"),
            " the policies were written to",
        )
    files = []
    for path in paths:
        try:
            text = path.read_text(encoding="utf-8")
            docs = load_all(text, str(path))
        except (OSError, UnicodeDecodeError) as exc:
            raise PolicyLoadError(f"{path}: cannot read it as YAML ({exc})") from None
        except YamlInputError as exc:
            raise PolicyLoadError(str(exc)) from None
        files.append((text, [policy for doc in docs for policy in _policies_in(doc)]))
    return files


@attrs.frozen
class VerifiedCapture:
    stats: ReadStats
    report: VerifyReport


def _inside(key: str, since: str, until: str) -> bool:
    return bool(key) and (not since or key >= since) and (not until or key <= until)


def verify_capture(
    source: str | Sequence[str],
    policies: Sequence[Mapping[str, Any]],
    options: DecideOptions,
    *,
    default_local_cluster: bool = True,
    window: tuple[str, str] = ("", ""),
) -> VerifiedCapture:
    """Check ``policies`` against a capture (files, folders, globs: as cpg replay reads
    them); UnreadableInput when it holds no Hubble record. Only flows inside ``window``
    (since, until time keys; "" is open) are checked."""
    capture = CaptureFlows([source] if isinstance(source, str) else source)
    since, until = window
    flows: Iterable[Flow] = capture
    if since or until:
        flows = (flow for flow in capture if _inside(time_key(flow.time), since, until))
    report = verify_flows(flows, policies, options, default_local_cluster=default_local_cluster)
    capture.check_readable()
    return VerifiedCapture(stats=capture.stats, report=report)
