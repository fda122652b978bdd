"""What a run is asked to do: the option table, the typed requests built from it, sessions and the live generator.

A layer of cpg_core (docs/ARCHITECTURE.md, "The core's layers"): it imports only the layers
below it, and nothing private crosses into another layer: what the other folders take from
it, they take from this package (the table below, loaded on first use), never from its
private modules."""

from typing import TYPE_CHECKING

from cpg_core.lazy import lazy_face

if TYPE_CHECKING:
    from cpg_core.requests._options import (
        OPTIONS,
        Option,
        Request,
        Value,
        option,
        options_of,
        tool_options,
    )
    from cpg_core.requests._run_request import (
        DriftRequest,
        ShadowRequest,
        readiness_rules,
    )

_WHERE = {
    "DriftRequest": "cpg_core.requests._run_request",
    "OPTIONS": "cpg_core.requests._options",
    "Option": "cpg_core.requests._options",
    "Request": "cpg_core.requests._options",
    "ShadowRequest": "cpg_core.requests._run_request",
    "Value": "cpg_core.requests._options",
    "option": "cpg_core.requests._options",
    "options_of": "cpg_core.requests._options",
    "tool_options": "cpg_core.requests._options",
    "readiness_rules": "cpg_core.requests._run_request",
}
"""Each name other folders take from this layer, and the module that has it."""

__getattr__ = lazy_face(__name__, _WHERE)
__all__ = [
    "OPTIONS",
    "DriftRequest",
    "Option",
    "Request",
    "ShadowRequest",
    "Value",
    "option",
    "options_of",
    "readiness_rules",
    "tool_options",
]
