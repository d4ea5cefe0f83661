"""`searchd` command line: serve a corpus root over gRPC, query it, run a batch into a TREC run."""

from __future__ import annotations

import json
import logging
import os
import re
import sys
from pathlib import Path

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from medsnip import __version__
from medsnip.cli_errors import CommandError, ExitCode, ToolGroup, Unreachable, fail
from medsnip.jsonout import emit_json
from medsnip.queries import FORMATS as QUERY_FORMATS
from searchd.admission import MAX_BULK_QUESTIONS

console = Console(stderr=True, soft_wrap=True)  # never wrap: paths must stay copyable


@click.group(cls=ToolGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="searchd")
def main() -> None:
    """Hybrid BM25 + dense search over medsnip corpora, served over gRPC."""


# (flag, default, type, help) of serve's limits: a table, not a wall of decorators
_LIMITS = (
    ("--max-k", 1000, click.IntRange(1), "Most hits a request may ask for."),
    ("--max-query-chars", 4096, click.IntRange(1), "Longest query accepted."),
    ("--max-batch", 4096, click.IntRange(1), "Most questions in one BatchSearch or /retrieve call."),
    ("--max-in-flight", 64, click.IntRange(1), "Calls served at once; more get RESOURCE_EXHAUSTED."),
    (
        "--max-bulk-questions",
        MAX_BULK_QUESTIONS,
        click.IntRange(1),
        "Questions of calls of more than 4 in flight together; a call past it gets RESOURCE_EXHAUSTED (HTTP 429) "
        "unless it is alone.",
    ),
    (
        "--max-call-seconds",
        300.0,
        click.FloatRange(0.001),
        "Longest a call may run; calls without a deadline (or a longer one) get this one.",
    ),
    ("--max-reply-mb", 64.0, click.FloatRange(0.001), "Largest reply built; a larger one is RESOURCE_EXHAUSTED."),
    ("--max-connections", 1000, click.IntRange(1), "Open client connections at most (more are refused)."),
    ("--idle-timeout", 300.0, click.FloatRange(0.001), "Close a connection after this many seconds without a call."),
    ("--grace", 10.0, click.FloatRange(0), "On SIGTERM, seconds running calls get before they are cancelled."),
)


def _heap(value: str) -> str:
    if not re.fullmatch(r"[1-9]\d*[kKmMgG]?", value):
        raise click.BadParameter(f"{value!r}: a size as -Xmx takes it, such as 512m or 2g")
    return value


def limit_options(command):
    for flag, default, kind, help_text in reversed(_LIMITS):
        command = click.option(flag, default=default, show_default=True, type=kind, help=help_text)(command)
    return command


@main.command()
@click.option(
    "--root",
    required=True,
    type=click.Path(path_type=Path, exists=True, file_okay=False),
    help="Corpus root (ROOT/<source>/ with store/, bm25/, dense-*/).",
)
@click.option("--corpora", multiple=True, help="Serve only these corpora (repeatable) [default: all].")
@click.option("--host", default="127.0.0.1", show_default=True, help="Interface; loopback unless you open it.")
@click.option("--port", default=50051, show_default=True, type=click.IntRange(0, 65535), help="0 picks a free port.")
@limit_options
@click.option("--tls-cert", type=click.Path(path_type=Path, exists=True, dir_okay=False))
@click.option("--tls-key", type=click.Path(path_type=Path, exists=True, dir_okay=False))
@click.option(
    "--token-file",
    type=click.Path(path_type=Path, exists=True, dir_okay=False),
    help="Require 'authorization: Bearer <token>' on every call.",
)
@click.option("--port-file", type=click.Path(path_type=Path), help="Write the bound port here once serving.")
@click.option("--device", default="auto", show_default=True, type=click.Choice(["auto", "cpu", "cuda"]))
@click.option(
    "--nprobe",
    type=click.IntRange(1),
    help="Inverted lists IVF dense indexes visit [default: each index's own]; requests may override.",
)
@click.option(
    "--refine",
    type=click.IntRange(0),
    help="Re-ranking factor of dense indexes built with `indexer dense --refine` [default: each index's "
    "own]; requests may override.",
)
@click.option(
    "--batch-wait-ms",
    default=2.0,
    show_default=True,
    type=click.FloatRange(0, 1000),
    help="How long a micro-batch waits for more queries once it has one (not while one caller is alone).",
)
@click.option(
    "--padded-query-batches",
    is_flag=True,
    help="Pad micro-batched queries to the longest (fewer, larger encoder batches, for a GPU; slower on a CPU; "
    "dense scores then vary in the 6th-7th digit with the batch instead of reproducing exactly).",
)
@click.option(
    "--watch",
    type=click.FloatRange(0.5),
    metavar="SECONDS",
    help="Read the root's build records this often and load a new complete generation as SIGHUP does "
    "(a root in the middle of an update is left alone until it is complete).",
)
@click.option(
    "--http-port",
    type=click.IntRange(0, 65535),
    help="Also serve HTTP/JSON on this port (0: a free one): Search-R1's POST /retrieve, POST /search, GET /health, "
    "/docs; same engine, limits, token and TLS as gRPC. Off unless given.",
)
@click.option("--http-port-file", type=click.Path(path_type=Path), help="Write the bound HTTP port here once serving.")
@click.option(
    "--retrieve-topk",
    default=3,
    show_default=True,
    type=click.IntRange(1),
    help="Hits per question of a /retrieve request that sends no topk (Search-R1's default).",
)
@click.option("--pid-file", type=click.Path(path_type=Path), help="Write the process id here (for `searchd reload`).")
@click.option(
    "--jvm-heap",
    default="1g",
    show_default=True,
    callback=lambda ctx, param, value: _heap(value),
    help="The JVM's heap bound (-Xmx) for Lucene's searchers: index files are mapped outside it, so a "
    "served root needs little heap; without a bound the JVM may take a quarter of the machine's "
    "memory before it collects.",
)
def serve(
    root,
    corpora,
    host,
    port,
    max_k,
    max_query_chars,
    max_batch,
    max_in_flight,
    max_bulk_questions,
    max_call_seconds,
    max_reply_mb,
    max_connections,
    idle_timeout,
    grace,
    tls_cert,
    tls_key,
    token_file,
    port_file,
    device,
    nprobe,
    refine,
    batch_wait_ms,
    padded_query_batches,
    watch,
    http_port,
    http_port_file,
    retrieve_topk,
    pid_file,
    jvm_heap,
) -> None:
    """Load every index under ROOT once and serve Search, BatchSearch, GetSnippets and Info.

    SIGHUP (`searchd reload`) or --watch loads the root again beside the serving generation and switches
    with no failed call; the versions it serves are leased against `medsnip prune`."""
    # The query encoder and the Lucene threads share the cores (about a third of the server's CPU per hybrid
    # query went to OpenMP spinning in docs/benchmarks.md): set before anything loads torch.
    from medsnip.encoders.transformer import prefer_passive_openmp

    prefer_passive_openmp()
    from searchd.auth import read_token
    from searchd.daemon import ConnectionLimits, announce_serving, build_server, serve_forever
    from searchd.engine import SearchEngine, ServingError, discover_corpora
    from searchd.hot_swap import EngineHolder, root_state, settle_loaded_objects
    from searchd.listening import BindError
    from searchd.server import Limits

    request_log = logging.getLogger("searchd")  # one JSON line per request, on stderr
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    request_log.addHandler(handler)
    request_log.setLevel(logging.INFO)
    request_log.propagate = False  # some imported libraries configure the root logger too
    if bool(tls_cert) != bool(tls_key):
        raise click.UsageError("--tls-cert and --tls-key go together")

    from indexer.jvm import start_jvm

    start_jvm(max_heap=jvm_heap)  # before any index loads, so the bound holds for the server's life

    def load(previous: SearchEngine | None = None) -> SearchEngine:
        return SearchEngine(
            root,
            list(corpora) or None,
            device=device,
            independent_queries=not padded_query_batches,
            nprobe=nprobe,
            wait_ms=batch_wait_ms,
            previous=previous,
            refine=refine,
        )

    def state() -> tuple | None:
        try:
            return root_state(discover_corpora(root, list(corpora) or None))
        except (ServingError, OSError, ValueError):  # an unreadable record: not a complete generation
            return None

    try:
        engine = load()
    except ServingError as error:
        fail(f"refusing to start: {error}")
    token = read_token(token_file) if token_file else None
    tls = (tls_key.read_bytes(), tls_cert.read_bytes()) if tls_cert else None
    limits = Limits(
        max_k,
        max_query_chars,
        max_batch,
        max_in_flight,
        max_call_seconds,
        int(max_reply_mb * 2**20),
        max_bulk_questions=max_bulk_questions,
    )
    try:
        running = build_server(
            EngineHolder(engine, load, state),
            host,
            port,
            limits,
            token,
            tls,
            connections=ConnectionLimits(max_connections, idle_timeout),
        )
    except BindError as error:
        engine.close()
        fail(f"refusing to start: {error}")
    bound = running.port
    if http_port is not None:
        from searchd.http_api import HttpServer

        try:
            running.http = HttpServer(
                running.servicer,
                running.health_status,
                host,
                http_port,
                token,
                tls,
                retrieve_topk,
                max_connections,
                idle_timeout,
                grace,
            ).start()
        except BindError as error:
            running.server.stop(0)
            engine.close()
            fail(f"refusing to start: {error}")
    announce_serving(running)
    if pid_file:
        from searchd.process_check import write_pid_file

        write_pid_file(pid_file, os.getpid(), root)
    from medsnip.buildrecord import atomic_write_bytes

    if port_file:
        atomic_write_bytes(port_file, str(bound).encode())  # whole or absent: a launcher polls for it
    if http_port_file and running.http:
        atomic_write_bytes(http_port_file, str(running.http.port).encode())
    served = ", ".join(
        f"{name} ({c.corpus.snippets:,} snippets: {'+'.join(c.retrievers)})" for name, c in engine.corpora.items()
    )
    console.print(
        f"searchd {__version__} serving {served} on {host}:{bound}"
        f"{' and HTTP on ' + host + ':' + str(running.http.port) if running.http else ''}"
        f"{' with TLS' if tls else ''}{' (token required)' if token else ''}"
    )
    settle_loaded_objects()
    try:
        serve_forever(running, grace=grace, watch=watch)
    finally:
        if pid_file:
            pid_file.unlink(missing_ok=True)


@main.command()
@click.option("--pid", type=int, help="searchd's process id.")
@click.option(
    "--pid-file",
    type=click.Path(path_type=Path, exists=True, dir_okay=False),
    help="The file `searchd serve --pid-file` wrote.",
)
@click.option("--server", "address", help="Also wait for the outcome, asking this server's Info (host:port).")
@click.option("--timeout", default=600.0, show_default=True, type=click.FloatRange(1), help="With --server.")
def reload(pid, pid_file, address, timeout) -> None:
    """Ask a running searchd to load its root again and switch generations (SIGHUP).

    With --server, wait until the new generation serves (exit 0) or the load failed, the old one still
    serving (exit 1, with the error)."""
    import signal
    import time

    from searchd.process_check import read_pid_file, searchd_problem

    if (pid is None) == (pid_file is None):
        raise click.UsageError("give --pid or --pid-file")
    root = None
    if pid_file is not None:
        try:
            pid, root = read_pid_file(pid_file)
        except ValueError as error:  # an input file that is not what it should be: exit 1, like any other
            fail(f"{error}; give the file `searchd serve --pid-file` wrote, or --pid")
    problem = searchd_problem(pid, root)
    if problem:
        fail(f"{problem}; nothing was signalled")
    import grpc

    before = None
    if address:
        with _client(address, None, False, None) as client:
            try:  # before any signal: an unreachable --server is exit 3 with nothing signalled
                before = json.loads(client.info().stats_json)["generation"]
            except grpc.RpcError as error:
                raise rpc_command_error(address, error) from None
    try:
        os.kill(pid, signal.SIGHUP)
    except ProcessLookupError:
        fail(f"no process {pid}")
    if not address:
        return
    deadline = time.monotonic() + timeout
    with _client(address, None, False, None) as client:
        while time.monotonic() < deadline:
            try:
                status = json.loads(client.info().stats_json)["generation"]
            except grpc.RpcError as error:
                raise rpc_command_error(address, error) from None
            if status["generation"] > before["generation"]:
                console.print(f"generation {status['generation']} serving")
                return
            if status["last_error"] and status["last_error"] != before["last_error"]:
                fail(f"reload failed, generation {status['generation']} still serving: {status['last_error']['error']}")
            time.sleep(0.2)
    fail(f"no new generation within {timeout:.0f} s")


def client_options(command):
    options = [
        click.option(
            "--server",
            "address",
            default="127.0.0.1:50051",
            show_default=True,
            envvar="SEARCHD_ADDRESS",
            help="searchd's address [or $SEARCHD_ADDRESS].",
        ),
        click.option("--token-file", type=click.Path(path_type=Path, exists=True, dir_okay=False)),
        click.option("--tls", is_flag=True, help="Connect with TLS."),
        click.option("--ca-file", type=click.Path(path_type=Path, exists=True, dir_okay=False)),
        click.option(
            "--retrievers",
            multiple=True,
            help="bm25, a dense index's name (dense-medcpt), or dense for all of them [default: all].",
        ),
        click.option("--corpora", multiple=True),
        click.option(
            "--fusion",
            type=click.Choice(["rrf", "medrag"]),
            help="rrf: every (corpus, retriever) list by rank; medrag: corpora merged by score per "
            "retriever, then RRF across retrievers (MedRAG's; use --rrf-k 100 as MedRAG does) [default: the "
            "root's served fusion (its recipe's [serve]), else rrf].",
        ),
        click.option(
            "--rrf-k", default=0, type=click.IntRange(0), help="RRF constant [default: the root's served one, else 60]."
        ),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def rpc_command_error(address: str, error) -> CommandError:
    """A failed call as the one line every searchd client command prints (refkit says the same): exit 3
    for a server that cannot be reached, 2 for arguments it rejected, 1 for any other refusal."""
    from searchd.client import SearchdRejected, SearchdUnreachable, searchd_error

    failure = searchd_error(address, error)
    if isinstance(failure, SearchdUnreachable):
        return Unreachable(str(failure))
    return CommandError(str(failure), ExitCode.USAGE if isinstance(failure, SearchdRejected) else ExitCode.FAILED)


def _client(address, token_file, tls, ca_file):
    from searchd.auth import read_token
    from searchd.client import SearchClient

    return SearchClient(address, token=read_token(token_file) if token_file else None, tls=tls, ca_file=ca_file)


@main.command()
@click.argument("text")
@client_options
@click.option("--k", default=10, show_default=True, type=click.IntRange(1))
@click.option("--json", "as_json", is_flag=True, help="One JSON object (the SearchResponse) instead of a table.")
def query(text, address, token_file, tls, ca_file, retrievers, corpora, fusion, rrf_k, k, as_json) -> None:
    """One query; prints the fused hits with each retriever's rank (a table, or with --json one JSON
    object: the SearchResponse in protobuf's JSON mapping)."""
    import grpc

    with _client(address, token_file, tls, ca_file) as client:
        try:
            response = client.search(text, k, retrievers=retrievers, corpora=corpora, rrf_k=rrf_k, fusion=fusion)
        except grpc.RpcError as error:
            raise rpc_command_error(address, error) from None
    if as_json:
        from google.protobuf import json_format

        emit_json(json_format.MessageToDict(response))
        return
    table = Table("#", "score", "id", "ranks", "title / content", title=f"{escape(text)} ({response.took_ms:.0f} ms)")
    for hit in response.hits:
        ranks = ", ".join(f"{r.corpus}/{r.retriever} {r.rank}" for r in hit.retrievers)
        table.add_row(
            str(hit.rank),
            f"{hit.score:.4f}",
            escape(hit.id),
            escape(ranks),
            f"[bold]{escape(hit.title)}[/bold]\n{escape(hit.content[:240])}",
        )
    # a pipe gets the whole table at a wide width instead of 80 wrapped columns
    (Console() if Console().is_terminal else Console(width=200)).print(table)


@main.command()
@click.argument("queries_file", type=click.Path(path_type=Path, exists=True, dir_okay=False))
@click.option("--out", required=True, type=click.Path(path_type=Path), help="TREC run file to write.")
@client_options
@click.option("--k", default=1000, show_default=True, type=click.IntRange(1))
@click.option("--batch", "batch_size", default=32, show_default=True, type=click.IntRange(1))
@click.option(
    "--format",
    "query_format",
    default="auto",
    show_default=True,
    type=click.Choice(QUERY_FORMATS),
    help="Query file format (docs: reference/query-files).",
)
def batch(
    queries_file,
    out,
    address,
    token_file,
    tls,
    ca_file,
    retrievers,
    corpora,
    fusion,
    rrf_k,
    k,
    batch_size,
    query_format,
) -> None:
    """Many queries through BatchSearch into a TREC run (for trec_eval or `indexer eval`)."""
    from rich.progress import Progress

    from medsnip.queries import QueryFileError, read_query_file

    try:
        queries = [(item.id, item.query) for item in read_query_file(queries_file, query_format)]
    except QueryFileError as error:  # an unusable input file: exit 1 (the message names file, line, field)
        fail(str(error))
    import grpc

    partial = out.with_name(out.name + ".partial")  # the run appears whole at the end, or not at all
    refused = 0
    try:
        with _client(address, token_file, tls, ca_file) as client, open(partial, "w", encoding="utf-8") as run:
            with Progress(console=console, transient=True) as progress:
                task = progress.add_task("queries", total=len(queries))
                for start in range(0, len(queries), batch_size):
                    chunk = queries[start : start + batch_size]
                    responses = client.batch_search(
                        [t for _, t in chunk],
                        k,
                        retrievers=retrievers,
                        corpora=corpora,
                        rrf_k=rrf_k,
                        fusion=fusion,
                        return_text=False,
                    )
                    for (qid, _), response in zip(chunk, responses, strict=True):
                        if response.error:  # this query alone was refused: the run goes on without it
                            refused += 1
                            console.print(f"query {qid} refused: {escape(response.error)}")
                        for hit in response.hits:
                            run.write(f"{qid} Q0 {hit.id} {hit.rank} {hit.score:.6f} searchd\n")
                    progress.advance(task, len(chunk))
        os.replace(partial, out)
    except grpc.RpcError as error:
        partial.unlink(missing_ok=True)
        raise rpc_command_error(address, error) from None
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    console.print(f"{len(queries)} queries{f' ({refused} refused)' if refused else ''} -> {out}")


@main.command(name="call")
@click.argument("method")
@click.argument("request", default="{}")
@click.option("--server", "address", default="127.0.0.1:50051", show_default=True)
@click.option("--token-file", type=click.Path(path_type=Path, exists=True, dir_okay=False))
@click.option("--tls", is_flag=True, help="Connect with TLS.")
@click.option("--ca-file", type=click.Path(path_type=Path, exists=True, dir_okay=False))
def call(method, request, address, token_file, tls, ca_file) -> None:
    """Any method of the service, its request as JSON; prints the response as JSON (one line per
    message of a stream). `searchd call Info`, `searchd call GetSnippets '{"ids": ["pubmed:1:0"]}'`.

    Made from the service's descriptor: a method added to search.proto and the server is callable here
    with no other code."""
    import grpc
    from google.protobuf import json_format

    try:
        fields = json.loads(request)
    except json.JSONDecodeError as error:
        raise click.BadParameter(f"not JSON: {error}", param_hint="REQUEST") from None
    with _client(address, token_file, tls, ca_file) as client:
        try:
            answer = client.call(method, fields)
            messages = answer if not hasattr(answer, "DESCRIPTOR") else [answer]
            for message in messages:
                emit_json(json_format.MessageToDict(message))
        except (ValueError, json_format.ParseError) as error:  # an unknown method, or a request not its message
            raise click.BadParameter(str(error)) from None
        except grpc.RpcError as error:
            raise rpc_command_error(address, error) from None


if __name__ == "__main__":
    main()
