"""Identity where Hubble leaves it out (ARCHITECTURE §D40): the book of what
CiliumEndpoints, CiliumIdentities and pods say, and the kinds of what it fills in."""

from cpg_core._flows.identities import (
    IDENTITY,
    KINDS,
    OWNER,
    UNTRUSTED,
    WORLD_POD,
    IdentityBook,
    IdentityInputError,
    KnownPod,
    identity_book,
    joined_books,
)

CLUSTER = "cluster"
"""The identity source that reads the objects from the cluster instead of a file."""

__all__ = [
    "CLUSTER",
    "IDENTITY",
    "KINDS",
    "OWNER",
    "UNTRUSTED",
    "WORLD_POD",
    "IdentityBook",
    "IdentityInputError",
    "KnownPod",
    "identity_book",
    "joined_books",
]
