"""Reading flows: the JSON parser and the quick reader, decisions and triage, the Hubble-style filters, identities where Hubble leaves them out, and how a flow becomes an allow entry.

A layer of cpg_core (docs/ARCHITECTURE.md, "The core's layers"): it imports only the layers
below it, and no name starting with an underscore crosses into another layer."""
