"""searchd reloaded many times stays flat: a retired generation's memory goes back at once (its references
dropped at close, a collection, malloc_trim), its query encoders are taken over by the next generation
rather than loaded again, and only the serving generation's index files stay mapped. A small real root,
a real server, twelve reloads each followed by a query (the full 100-reload measurement on two sizes is
in make bench: bench/reload_bench.py)."""

from __future__ import annotations

import json
import signal

from searchd.client import SearchClient
from searchd.launch import start_background_server

RELOADS, WARM_UP = 12, 3
# Were a retired generation kept until some later collection (and the query encoder loaded again each
# time), this root would grow by ~55 MiB a reload (measured: 810 -> 1,420 MiB over these 12 reloads).
ALLOWED_GROWTH_MB = 40


def memory_and_generation(client: SearchClient) -> tuple[dict, dict]:
    stats = json.loads(client.info().stats_json)
    return stats["memory"], stats["generation"]


def mapped_index_files(pid: int, root) -> int:
    with open(f"/proc/{pid}/maps", encoding="utf-8") as maps:
        return len({line.split()[-1] for line in maps if str(root) in line})


def test_rss_and_mapped_files_stay_flat_over_reloads(search_root):
    process, address = start_background_server(search_root)
    try:
        with SearchClient(address) as client:
            client.search("Is mitral valve prolapse hereditary?", k=5, retrievers=["bm25", "dense-minilm"])
            first_maps = mapped_index_files(process.pid, search_root)
            rss_after, maps_after = [], []
            for reload in range(1, RELOADS + 1):
                process.send_signal(signal.SIGHUP)
                _wait_for_generation(client, reload + 1)
                hits = client.search("Is mitral valve prolapse hereditary?", k=5, retrievers=["bm25", "dense-minilm"])
                assert hits.hits
                memory, generation = memory_and_generation(client)
                assert generation["retired_still_finishing"] == 0
                rss_after.append(memory["vmrss_mb"])
                maps_after.append(mapped_index_files(process.pid, search_root))
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=60) == 0
    growth = rss_after[-1] - rss_after[WARM_UP - 1]
    assert growth < ALLOWED_GROWTH_MB, f"RSS after each reload (MiB): {rss_after}"
    assert max(maps_after) <= first_maps, f"mapped index files: {first_maps} at start, then {maps_after}"


def _wait_for_generation(client: SearchClient, wanted: int, seconds: float = 120.0) -> None:
    import time

    deadline = time.monotonic() + seconds
    while memory_and_generation(client)[1]["generation"] < wanted:
        assert time.monotonic() < deadline, f"generation {wanted} did not come in {seconds} s"
        time.sleep(0.05)
