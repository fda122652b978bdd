"""What a replay session is: the content it read. Replaying content already recorded replaces
that session's evidence instead of adding to it, so confidence (flows, sessions) only grows
with traffic cpg has not counted yet (ARCHITECTURE §D24)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence

import attrs

from cpg_core._base.documents import InputDigest, SessionInfo

REPLAY_PREFIX = "replay-"


def replay_session_id(inputs: Sequence[InputDigest]) -> str:
    """``replay-<16 hex>`` from the inputs' contents (not their names: the same artifact
    downloaded to another folder is the same session)."""
    digest = hashlib.sha256()
    for item in sorted(inputs, key=lambda i: (i.sha256, i.bytes)):
        digest.update(f"{item.sha256}:{item.bytes}\n".encode())
    return REPLAY_PREFIX + digest.hexdigest()[:16]


def prefix_offsets(
    recorded: Iterable[SessionInfo], sizes: Mapping[str, int]
) -> dict[str, tuple[int, ...]]:
    """For each new input, the lengths of recorded inputs shorter than it: where its digest
    must also be taken to tell whether it grew from one of them."""
    lengths = sorted({i.bytes for s in recorded for i in s.inputs})
    return {name: tuple(n for n in lengths if 0 < n < size) for name, size in sizes.items()}


@attrs.frozen(slots=True)
class ReplayIdentity:
    """How a replay's inputs relate to the sessions already recorded."""

    replaces: frozenset[str] = frozenset()
    """Recorded sessions whose every input this replay read again (the same content, or the
    same content followed by more): their contribution is replaced by this one's."""
    recorded_by: str = ""
    """A recorded session that read every input of this replay and more: this replay adds
    nothing new, and its evidence is left as it is."""

    # The three steps an adapter takes, under one name.
    @staticmethod
    def session_id(inputs: Sequence[InputDigest]) -> str:
        return replay_session_id(inputs)

    @staticmethod
    def offsets(
        recorded: Iterable[SessionInfo], sizes: Mapping[str, int]
    ) -> dict[str, tuple[int, ...]]:
        return prefix_offsets(recorded, sizes)

    @staticmethod
    def of(
        recorded: Iterable[SessionInfo],
        inputs: Sequence[InputDigest],
        prefixes: Mapping[tuple[str, int], str],
    ) -> ReplayIdentity:
        return replay_identity(recorded, inputs, prefixes)


def replay_identity(
    recorded: Iterable[SessionInfo],
    inputs: Sequence[InputDigest],
    prefixes: Mapping[tuple[str, int], str],
) -> ReplayIdentity:
    """``prefixes`` maps (new input name, length) to the digest of its first length bytes."""
    if not inputs:
        return ReplayIdentity()

    def covered(old: InputDigest) -> bool:
        return any(
            (new.sha256 == old.sha256 and new.bytes == old.bytes)
            or (new.bytes > old.bytes and prefixes.get((new.name, old.bytes)) == old.sha256)
            for new in inputs
        )

    replaces: set[str] = set()
    recorded_by = ""
    new_contents = {(i.sha256, i.bytes) for i in inputs}
    for session in recorded:
        if not session.inputs:
            continue
        if all(covered(old) for old in session.inputs):
            replaces.add(session.id)
            continue
        old_contents = {(i.sha256, i.bytes) for i in session.inputs}
        if new_contents < old_contents and not recorded_by:
            recorded_by = session.id
    return ReplayIdentity(frozenset(replaces), "" if replaces else recorded_by)
