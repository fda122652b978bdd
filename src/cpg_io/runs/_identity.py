"""Which inputs a replay read, by content, and how they relate to the sessions its evidence
folder already holds (ARCHITECTURE §D24)."""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Mapping, Sequence

from cpg_core import InputDigest, ReplayIdentity
from cpg_io.evidence_store import EvidenceStore
from cpg_io.remote import is_url

_BLOCK = 1 << 20


def input_sizes(files: Sequence[str]) -> dict[str, int] | None:
    """Each local input's size before it is read (what its digest will cover: a file that
    grows while cpg reads it is identified by the part it had). None when an input is
    standard input, a pipe or a URL: such a replay is not identified and its evidence adds."""
    sizes: dict[str, int] = {}
    for name in files:
        if name == "-" or is_url(name):
            return None
        try:
            status = os.stat(name)
        except OSError:
            return None
        if not stat.S_ISREG(status.st_mode):  # a pipe or a device: read once, not identified
            return None
        sizes[name] = status.st_size
    return sizes


def identify(
    sizes: Mapping[str, int], store: EvidenceStore
) -> tuple[tuple[InputDigest, ...], ReplayIdentity]:
    """The inputs' digests and what they replace in ``store``; one read of each input."""
    recorded = store.replay_sessions()
    offsets = ReplayIdentity.offsets(recorded, sizes)
    inputs: list[InputDigest] = []
    prefixes: dict[tuple[str, int], str] = {}
    for name, size in sizes.items():
        full, at = _digests(name, size, offsets.get(name, ()))
        if full is None:
            return (), ReplayIdentity()
        inputs.append(InputDigest(name=name, bytes=size, sha256=full))
        prefixes.update({(name, n): digest for n, digest in at.items()})
    return tuple(inputs), ReplayIdentity.of(recorded, inputs, prefixes)


def _digests(name: str, size: int, offsets: Sequence[int]) -> tuple[str | None, dict[int, str]]:
    """sha256 of the first ``size`` bytes of ``name`` and of its first ``n`` bytes for each
    offset; (None, {}) when the file is shorter than it was (replaced while being read)."""
    digest = hashlib.sha256()
    at: dict[int, str] = {}
    stops = sorted(set(offsets))
    done = 0
    try:
        with open(name, "rb") as stream:
            while done < size:
                limit = min(size, stops[0]) if stops else size
                block = stream.read(min(_BLOCK, limit - done))
                if not block:
                    return None, {}
                digest.update(block)
                done += len(block)
                while stops and stops[0] == done:
                    at[stops.pop(0)] = digest.hexdigest()
    except OSError:
        return None, {}
    return digest.hexdigest(), at
