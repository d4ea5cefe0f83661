"""medsnip: the ground floor every stage stands on: the snippet and build-record contracts, corpus
versions and their lineage, generations and leases, executors, job locks, process hygiene, query
files, and the text encoders indexer, searchd and refkit share (medsnip.encoders)."""

__version__ = "0.1.0"

TOOLS = ("corpusbuild", "indexer", "searchd", "refkit", "medsnip")


def silence_grpc_core() -> None:
    """Keep gRPC's C core from printing its own log lines (a taken port: `E1128 ... add_port.cc:83] Failed to
    add port`) beside a tool's one-line error. The core reads GRPC_VERBOSITY once, when grpc is imported, so the
    packages that use gRPC call this from their __init__, before any of their modules imports it. Only when
    running as one of the tools (a library user's process is left alone), and never with --verbose or
    MEDSNIP_VERBOSE; a GRPC_VERBOSITY the user set wins."""
    import os
    import sys

    command = os.path.basename(sys.argv[0]) if sys.argv else ""
    if command not in TOOLS and command != "-m":
        return
    if os.environ.get("MEDSNIP_VERBOSE") or "--verbose" in sys.argv[1:]:
        return
    os.environ.setdefault("GRPC_VERBOSITY", "NONE")
