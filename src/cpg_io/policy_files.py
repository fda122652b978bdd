"""Reading folders of Cilium policy YAML (what cpg wrote, a pull request, ``kubectl get -o
yaml`` output): every CiliumNetworkPolicy and CiliumClusterwideNetworkPolicy, lists included."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cpg_core import Setting
from cpg_core.cilium import YamlInputError, load_all
from cpg_io.errors import PolicyLoadError

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
