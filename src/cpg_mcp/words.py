"""cpg-mcp's spelling of the settings that requests and errors name neutrally: a tool argument
where start_session has one, else what the operator sets for the server."""

from __future__ import annotations

from cpg_core import CpgError

ARGUMENTS = {
    "ignore_protocol": "ignore_protocols",
    "ignore_drop_reason": "ignore_drop_reasons",
    "l7_collapse_paths": "l7_collapse_paths",
    "max_samples": "evidence_samples",
    "kubeconfig": "KUBECONFIG in cpg-mcp's environment",
    "context": "the kubeconfig's current context",
    "tls": "the tls arguments",
    "output_dir": "the session's policy folder",
    "evidence_dir": "the session's evidence folder",
    "no_evidence": "a session without evidence (not offered)",
    "cluster": "from_cluster",
    "from": "source",
    "to": "destination",
}
"""Where the tool's word is not the field name itself."""


def argument(name: str) -> str:
    return ARGUMENTS.get(name, name)


def in_tool_words(error: BaseException) -> str:
    """An error's message as an agent can act on it."""
    return error.render(argument) if isinstance(error, CpgError) else str(error)
