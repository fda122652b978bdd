"""The one exception family cpg_core raises, so callers can catch a single type."""


class CpgError(Exception):
    """Base of every error cpg_core raises on purpose."""


class FlowParseError(CpgError, ValueError):
    """A flow record could not be understood; the message says which field and why."""


class PolicyMergeError(CpgError):
    """An existing policy file could not be merged; the message says why and what to do."""


class SelectorMismatchError(PolicyMergeError):
    """The existing file selects other endpoints than the policy being merged into it."""
