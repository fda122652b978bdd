"""The CLI's spelling of the settings that requests and errors name neutrally."""

from __future__ import annotations

import functools

from cpg_core.options import OPTIONS

FLAGS = {
    "namespace": "--namespace",
    "all_namespaces": "-n/-A",
    "max_samples": "--evidence-samples",
    "direction": "--ingress/--egress",
    "tls": "--tls flags",
    "output_dir": "--output-dir",
    "ignore_protocols": "--ignore-protocol",
    "ignore_drop_reasons": "--ignore-drop-reason",
    "evidence": "--no-evidence",
    "diff": "--no-diff",
    "shadow_policies": "--policies",
    "flow_filter": "--from-pod/--to-pod/--pod/--from-label/--to-label/--label/--port/--verdict",
}
"""Where the flag is not ``--`` and the field name with dashes."""


@functools.cache
def _table_flags() -> dict[str, str]:
    """Each option's long flag, by its name and by its parameter's (the table's spelling)."""
    spelled: dict[str, str] = {}
    for entry in OPTIONS:
        long = next(f for f in entry.flags if f.startswith("--"))
        spelled.setdefault(entry.name, long)
        spelled.setdefault(entry.parameter, long)
    return spelled


def flag(name: str) -> str:
    """``ignore_protocol`` → ``--ignore-protocol``; ``default_local_cluster`` (the check
    request's name) → ``--policy-default-local-cluster``."""
    return FLAGS.get(name) or _table_flags().get(name) or "--" + name.replace("_", "-")
