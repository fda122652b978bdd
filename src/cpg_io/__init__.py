"""cpg_io: the adapters that touch the world — flow files, atomic stores, the replay pipeline."""

import os

# gRPC's C core logs on its own (a relay's GOAWAY at a restart is an INFO line) to stderr,
# where cpg's log is. Only its errors unless the user asks for more: set before any cpg_io
# module imports grpc (the forked receiving process inherits it).
os.environ.setdefault("GRPC_VERBOSITY", "ERROR")
