"""The retrieval server of Search-R1's design, rebuilt for the runners benchmark from its published shape:
FastAPI and uvicorn, `POST /retrieve` taking `{"queries", "topk", "return_scores"}` and answering
`{"result": [[{"document": {"id", "contents"}, "score"}, ...], ...]}`, one FAISS Flat index held whole in
memory, the corpus held as a Python list of `{"id", "contents"}` rows, each request's queries encoded in batches of
512 padded to their longest query (as Search-R1's encoder pads, with torch's own threads), searched in one call, and
their documents looked up by row. Dense only: no BM25, no fusion. `--bucketed` encodes as medsnip's servers do
instead (length buckets, exact whatever the batch): the same server with a faster encoder.

It is the reference `bench/runners_bench.py` measures searchd against; it is not Search-R1's code. Its
vectors are a medsnip dense index's own embeddings (so both servers search the same vectors) and its query
encoder is that index's (medsnip.encoders), so the two differ in how they serve, not in what they encode.

    python bench/search_r1_server.py CORPUS_DIR DENSE_DIR --port-file F
"""

from __future__ import annotations

import argparse
import socket
import sys
from pathlib import Path

import numpy as np
import orjson
from fastapi import FastAPI
from pydantic import BaseModel

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def load_rows(corpus: Path) -> list[dict]:
    """The corpus in row order (shard by shard, as the dense index's rows), as Search-R1's corpora write a
    document: its id and `"title"\\ntext`."""
    from medsnip.snippet import SHARD_GLOB, iter_snippets

    rows = []
    for shard in sorted(corpus.glob(SHARD_GLOB)):
        for snippet in iter_snippets(shard):
            rows.append({"id": snippet["id"], "contents": f'"{snippet["title"]}"\n{snippet["content"]}'})
    return rows


def load_flat(dense: Path):
    """(a FAISS IndexFlatIP of every embedding the dense index keeps, its query encoder)."""
    import faiss

    from medsnip.encoders import DenseEncoder, EncoderSpec

    record = orjson.loads((dense / "build.json").read_bytes())
    vectors = np.concatenate([np.load(dense / entry["embeddings"]) for entry in record["shards"]]).astype(np.float32)
    index = faiss.IndexFlatIP(vectors.shape[1])
    index.add(vectors)
    encoder = DenseEncoder(EncoderSpec.from_dict(record["encoder"]), device="cpu", queries_only=True)
    return index, encoder


class QueryRequest(BaseModel):
    queries: list[str]
    topk: int | None = None
    return_scores: bool = False


SEARCH_R1_BATCH = 512  # Search-R1's retrieval_batch_size


def create_app(rows: list[dict], index, encoder, default_topk: int = 3, bucketed: bool = False) -> FastAPI:
    app = FastAPI()

    @app.post("/retrieve")
    def retrieve(request: QueryRequest):
        topk = request.topk or default_topk
        vectors = encoder.encode_queries(request.queries, batch_size=SEARCH_R1_BATCH, independent=bucketed)
        scores, found = index.search(np.ascontiguousarray(vectors, dtype=np.float32), topk)
        result = []
        for row_scores, row_ids in zip(scores.tolist(), found.tolist(), strict=True):
            documents = [rows[i] for i in row_ids]
            if request.return_scores:
                result.append([{"document": d, "score": s} for d, s in zip(documents, row_scores, strict=True)])
            else:
                result.append(documents)
        return {"result": result}

    return app


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("corpus", type=Path)
    parser.add_argument("dense", type=Path)
    parser.add_argument("--port-file", type=Path, required=True)
    parser.add_argument("--bucketed", action="store_true", help="medsnip's length-bucketed query encoding")
    args = parser.parse_args()
    import uvicorn

    rows = load_rows(args.corpus)
    index, encoder = load_flat(args.dense)
    assert index.ntotal == len(rows), (index.ntotal, len(rows))
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # as uvicorn.run(host, port) gets from asyncio
    sock.listen(2048)
    args.port_file.write_text(str(sock.getsockname()[1]))
    config = uvicorn.Config(
        create_app(rows, index, encoder, bucketed=args.bucketed), log_level="warning", access_log=False
    )
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    main()
