"""The CLI's spelling of the settings that requests and errors name neutrally."""

from __future__ import annotations

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


def flag(name: str) -> str:
    """``ignore_protocol`` → ``--ignore-protocol``."""
    return FLAGS.get(name) or "--" + name.replace("_", "-")
