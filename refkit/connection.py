"""refkit's connection to searchd: a SearchClient plus what the server says about its indexes.

refkit never opens index files; everything it knows about the corpora (their lineage, the retrievers
and the encoder) comes from `Info`, and it is recorded with every reference so a collection can be
tied to the exact indexes that produced it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import grpc

from medsnip.buildrecord import lineage_hash
from searchd.auth import read_token
from searchd.client import SearchClient, SearchdRejected, SearchdUnreachable, searchd_error


class ServerError(RuntimeError):
    """The server cannot be reached (`unreachable`), refused the request's arguments (`rejected`) or refused
    the call otherwise (the message says which and why)."""

    unreachable = False
    rejected = False


def server_error(address: str, error: grpc.RpcError) -> ServerError:
    """A failed call as refkit's error, with searchd's one sentence for it."""
    failure = searchd_error(address, error)
    problem = ServerError(str(failure))
    problem.unreachable = isinstance(failure, SearchdUnreachable)
    problem.rejected = isinstance(failure, SearchdRejected)
    return problem


@dataclass
class ServerOptions:
    address: str
    token_file: Path | None = None
    tls: bool = False
    ca_file: Path | None = None
    timeout: float = 120.0


def connect(options: ServerOptions, queries: list | None = None) -> tuple[SearchClient, dict]:
    """A client and the server's lineage summary; raises ServerError if the server does not answer, and
    ValueError naming the query when one of `queries` is longer than the server accepts (before any is
    sent: one long query would otherwise fail a whole batch)."""
    token = read_token(options.token_file) if options.token_file else None
    client = SearchClient(
        options.address, token=token, tls=options.tls, ca_file=options.ca_file, retries=2, timeout=options.timeout
    )
    try:
        info = client.info(timeout=10)
    except grpc.RpcError as error:
        client.close()
        raise server_error(options.address, error) from error
    too_long = [q for q in queries or () if len(q.query) > info.max_query_chars]
    if too_long:
        client.close()
        first = too_long[0]
        raise ValueError(
            f"query {first.id} has {len(first.query):,} characters, more than searchd's limit of "
            f"{info.max_query_chars:,} (searchd serve --max-query-chars); {len(too_long)} such queries in all"
        )
    return client, lineage_summary(info)


def lineage_summary(info) -> dict:
    """{"server_version", "encoder", "corpora": {name: {"corpus": ..., "bm25": ..., "dense-minilm": ...}}}: per
    corpus, the lineage hash of the corpus its indexes were built from and each index's own (the hash
    of what the index is, as medsnip.buildrecord.lineage_hash defines it: rebuilding it to the same
    bytes keeps it, any change of parameters, model or corpus changes it)."""
    corpora = {}
    for corpus in info.corpora:
        entry = {"corpus": corpus.lineage_sha256}
        for index in corpus.indexes:
            entry["corpus"] = index.lineage_sha256
            entry[index.retriever] = lineage_hash(json.loads(index.build_json))
        corpora[corpus.name] = entry
    encoder = json.loads(info.encoder_json) if info.encoder_json else None
    serve = json.loads(info.stats_json).get("serve") if info.stats_json else None
    return {"server_version": info.server_version, "encoder": encoder, "corpora": corpora, "serve": serve}


def check_same_generation(client, address: str, lineage: dict) -> None:
    """ServerError unless the server still serves the generation `lineage` describes. searchd switches
    generations forward only, so a run whose last check passes was served by one generation from start
    to end; one that fails would mix references of two corpus versions under one lineage label."""
    try:
        current = lineage_summary(client.info())
    except grpc.RpcError as error:
        raise server_error(address, error) from error
    if current["corpora"] != lineage["corpora"]:
        changed = sorted(
            name
            for name in set(current["corpora"]) | set(lineage["corpora"])
            if current["corpora"].get(name) != lineage["corpora"].get(name)
        )
        raise ServerError(
            f"searchd at {address} switched generations during the run ({', '.join(changed)} changed): its "
            "answers would mix two versions of the corpus under one lineage; nothing was written, run again"
        )
