"""Reading flows: the JSON parser and the quick reader, decisions and triage, the Hubble-style filters, identities where Hubble leaves them out, and how a flow becomes an allow entry.

A layer of cpg_core (docs/ARCHITECTURE.md, "The core's layers"): it imports only the layers
below it, and nothing private crosses into another layer: what the other folders take from
it, they take from this package (the table below, loaded on first use), never from its
private modules."""
