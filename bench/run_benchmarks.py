"""`make bench`: corpusbuild pubmed against the pipeline a careful user would write, same run, same
machine, same input; writes docs/benchmarks.md.

Input: real PubMed records from samples/pubmed (baseline/update, efetch and legacy MEDLINE files)
repeated round-robin under new PMIDs into files of 30,000 citations (pubmed_scaleup): no text is
invented. Every pipeline runs in its own process; wall time covers the whole job (start-up, parse,
clean, chunk, write) and peak RSS comes from wait4 (the largest process of the tree).
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from importlib.metadata import version
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from pubmed_scaleup import write_scaled_pubmed  # noqa: E402
from wiki_scaleup import write_multistream_dump  # noqa: E402

from corpusbuild.chunking import chunk_text  # noqa: E402

RECORDS_PER_FILE = 30_000


def measure(command: list[str], one_core: bool = False) -> tuple[float, float]:
    """(wall seconds, peak RSS MiB of the largest process in the tree) of one command; with `one_core`
    the process (and any it starts) is pinned to one CPU, so "on one core" means exactly that."""
    pin = (lambda: os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})) if one_core else None
    started = time.perf_counter()
    process = subprocess.Popen(command, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, preexec_fn=pin)
    _, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - started
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        raise RuntimeError(f"{command} failed: {process.stderr.read().decode()[-2000:]}")
    return seconds, usage.ru_maxrss / 1024


def ours(inputs: list[Path], out: Path, workers: int, shards: int = 8) -> list[str]:
    shutil.rmtree(out, ignore_errors=True)
    return [
        sys.executable,
        "-m",
        "corpusbuild",
        "pubmed",
        *map(str, inputs),
        "--out",
        str(out),
        "--shards",
        str(shards),
        "--workers",
        str(workers),
        "--quiet",
    ]


def pipeline(kind: str, source: Path, out: Path) -> list[str]:
    return [sys.executable, str(REPO / "bench" / "pubmed_pipelines.py"), kind, str(source), str(out)]


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def pubmed_pair(work: Path) -> list[Path]:
    """Two files of RECORDS_PER_FILE real PubMed records with new PMIDs (written once)."""
    sources = sorted((REPO / "samples" / "pubmed").iterdir())
    files = []
    for number in (1, 2):
        path = work / f"pubmed25n{number:04d}.xml.gz"
        if not path.exists():
            print(f"writing {path} ({RECORDS_PER_FILE:,} real records, new PMIDs)", flush=True)
            write_scaled_pubmed(sources, path, RECORDS_PER_FILE, 40_000_000 + (number - 1) * RECORDS_PER_FILE)
        files.append(path)
    return files


def pubmed_section(args) -> list[str]:
    files = pubmed_pair(args.work)

    single = {"medsnip corpusbuild pubmed": [], "reference pipeline": [], "pubmed_parser alone": []}
    scaling = {1: [], 2: []}
    for repeat in range(args.repeats):
        print(f"round {repeat + 1}/{args.repeats}", flush=True)
        single["medsnip corpusbuild pubmed"].append(measure(ours(files[:1], args.work / "ours", 1), True))
        single["reference pipeline"].append(measure(pipeline("reference", files[0], args.work / "ref.jsonl"), True))
        single["pubmed_parser alone"].append(measure(pipeline("pubmed_parser", files[0], args.work / "pp"), True))
        for workers in (1, 2):
            scaling[workers].append(measure(ours(files, args.work / f"scale{workers}", workers)))

    def best_rate(runs, articles):
        """Best of the runs: this shared VM's speed drifts by +-15% between runs (steal, clocks), and
        the fastest run is the one least disturbed (as timeit reports)."""
        seconds = min(s for s, _ in runs)
        return seconds, articles / seconds, max(rss for _, rss in runs)

    reference_rate = best_rate(single["reference pipeline"], RECORDS_PER_FILE)[1]
    lines = [
        "## corpusbuild pubmed, one core, against the pipeline a careful user would write",
        "",
        f"- machine of this section's run: {os.cpu_count()} cores, {cpu_model()}",
        f"- input: {RECORDS_PER_FILE:,} real PubMed citations per file: the records of samples/pubmed "
        "(efetch, update-file and legacy MEDLINE records, about a third without an abstract) repeated "
        "under new PMIDs, gzip-compressed like NLM's files",
        "",
        "The reference pipeline: `pubmed_parser.parse_medline_xml` -> `ftfy.fix_text` on title and abstract "
        "-> LangChain `RecursiveCharacterTextSplitter(1000, 200)` -> JSON lines. medsnip does the same "
        "cleaning (ftfy, proven equal by tests/test_cleaning.py) and chunking (proven equal by "
        "tests/test_chunking.py), keeps abstract labels, MeSH, chemicals, keywords, publication types, "
        "applies update/delete semantics and writes 8 sorted shards, parts for resume and build.json.",
        "",
        "| pipeline | wall s | articles/s | vs reference | peak RSS MiB |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, runs in single.items():
        seconds, rate, rss = best_rate(runs, RECORDS_PER_FILE)
        lines.append(f"| {name} | {seconds:.2f} | {rate:,.0f} | {rate / reference_rate:.2f}x | {rss:.0f} |")
    ours_rate = best_rate(single["medsnip corpusbuild pubmed"], RECORDS_PER_FILE)[1]
    one = best_rate(scaling[1], 2 * RECORDS_PER_FILE)
    two = best_rate(scaling[2], 2 * RECORDS_PER_FILE)
    paired = per_round_ratios(single["reference pipeline"], single["medsnip corpusbuild pubmed"])
    paired_scaling = per_round_ratios(scaling[1], scaling[2])
    lines += [
        "",
        "Targets: at least 4x the reference's articles/s on one core with peak RSS under 300 MB per worker; "
        "4.5x asked since (the speed before the kept work was compressed). Measured: "
        f"{ours_rate / reference_rate:.2f}x (best against best). Each round runs both back to back; the ratio "
        f"within a round was {describe_ratios(paired)}. Compressing each document's block of the kept work "
        "(ISA-L level 0, then inflating it in the merge) costs about 7% of this single-core run (py-spy) and "
        "keeps the work at about a quarter of the shards' bytes.",
        "",
        "## Scaling from 1 to 2 workers (two files, 60,000 citations)",
        "",
        "| workers | wall s | articles/s | speed-up | peak RSS MiB (largest process) |",
        "|---:|---:|---:|---:|---:|",
        f"| 1 | {one[0]:.2f} | {one[1]:,.0f} | 1.00x | {one[2]:.0f} |",
        f"| 2 | {two[0]:.2f} | {two[1]:,.0f} | {two[1] / one[1]:.2f}x | {two[2]:.0f} |",
        "",
        f"Speed-up within a round (1 then 2 workers, back to back): {describe_ratios(paired_scaling)}. "
        "Files are parsed in parallel (one task per file) and shards merged in parallel (one task per shard); "
        "with two cores the ceiling is 2x minus start-up and the merge.",
        "",
    ]
    return lines


def per_round_ratios(slower: list[tuple[float, float]], faster: list[tuple[float, float]]) -> list[float]:
    """slower/faster wall time of the runs made in the same round: this VM's speed drifts by 20-30%
    over minutes, so runs made seconds apart are the fairer pair; the best-of rows can pair a fast
    moment of one pipeline with a slow moment of the other."""
    return [a / b for (a, _), (b, _) in zip(slower, faster, strict=True)]


def describe_ratios(ratios: list[float]) -> str:
    median, low, high = statistics.median(ratios), min(ratios), max(ratios)
    return f"{median:.2f}x median, {low:.2f}x to {high:.2f}x over {len(ratios)} rounds"


def wikipedia_section(args) -> list[str]:
    """corpusbuild wikipedia vs a plain iterparse + strip_code loop, and 1 -> 2 workers."""
    source = REPO / "samples" / "wikipedia" / "enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"
    dump = args.work / "enwiki-20261101-pages-articles-multistream.xml.bz2"
    chars = write_multistream_dump(source, dump, copies=8, id_offset=0)  # and its index beside it
    dumps = [dump]
    runs: dict[str, list] = {"reference": [], 1: [], 2: []}
    for repeat in range(args.repeats):
        print(f"wikipedia round {repeat + 1}/{args.repeats}", flush=True)
        runs["reference"].append(
            measure([sys.executable, str(REPO / "bench" / "wiki_reference.py"), *map(str, dumps)], one_core=True)
        )
        for workers in (1, 2):
            out = args.work / f"wiki{workers}"
            shutil.rmtree(out, ignore_errors=True)
            command = [
                sys.executable,
                "-m",
                "corpusbuild",
                "wikipedia",
                *map(str, dumps),
                "--out",
                str(out),
                "--shards",
                "8",
                "--workers",
                str(workers),
                "--range-mb",
                "2",
                "--quiet",
            ]
            runs[workers].append(measure(command, one_core=workers == 1))

    def rate(key):
        seconds = min(s for s, _ in runs[key])  # best of the runs, as for PubMed
        return seconds, chars / seconds / 1e6, max(r for _, r in runs[key])

    reference, one, two = rate("reference"), rate(1), rate(2)
    return [
        "## corpusbuild wikipedia",
        "",
        "- input: one multistream dump with its index (100 pages per bz2 stream, as Wikimedia writes them) of the "
        "real enwiki slice in samples/wikipedia (206 pages) re-issued 8 times under new page ids: "
        f"{dump.stat().st_size / 1e6:.1f} MB compressed, {chars / 1e6:.1f} M characters of article wikitext "
        "(main namespace, no redirects)",
        "- reference: one process, lxml iterparse + `mwparserfromhell.parse(text).strip_code()` per article "
        "(no sections, no chunking, nothing written)",
        "- medsnip: the same parse plus section structure, template/ref/table/file/category removal, ftfy, "
        "chunking, sharded output and build.json",
        "",
        "| pipeline | wall s | M wikitext chars/s | vs reference | peak RSS MiB |",
        "|---|---:|---:|---:|---:|",
        *(
            f"| {name} | {seconds:.2f} | {speed:.2f} | {speed / reference[1]:.2f}x | {rss:.0f} |"
            for name, (seconds, speed, rss) in [
                ("reference loop, 1 process", reference),
                ("corpusbuild wikipedia, 1 worker", one),
                ("corpusbuild wikipedia, 2 workers", two),
            ]
        ),
        "",
        f"Speed-up from 1 to 2 workers on this one dump: {two[1] / one[1]:.2f}x (target 1.8x). With 2 workers "
        "the dump is split into ranges of whole bz2 streams at the index's offsets (`--range-mb 2` here; the "
        "default 64 MB gives enwiki's 22 GB multistream dump ~350 ranges), each parsed by whichever worker is "
        "free; the shards are byte-identical to a one-worker build (tests/test_dump_split.py).",
        "",
    ]


def chunker_section() -> list[str]:
    """corpusbuild's splitter vs LangChain's on the same real text, and proof the chunks are equal."""
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    sys.path.insert(0, str(REPO / "tests"))
    from realtext import pubmedqa_abstracts, textbook_books

    # one line per book and abstract, so the splitter works at word level (its costly case)
    texts = [" ".join(text.split()) for text in (*textbook_books().values(), *pubmedqa_abstracts())] * 20
    total = sum(map(len, texts))
    stock = RecursiveCharacterTextSplitter(chunk_size=1000, chunk_overlap=200)
    started = time.perf_counter()
    reference = [stock.split_text(text) for text in texts]
    langchain_seconds = time.perf_counter() - started
    started = time.perf_counter()
    ours = [chunk_text(text, 1000, 200) for text in texts]
    our_seconds = time.perf_counter() - started
    identical = ours == reference
    chunks = sum(map(len, ours))
    return [
        "## Chunker",
        "",
        "Real text (the 10 sample textbooks and PubMedQA's 500 abstracts, whitespace collapsed, 20 passes): "
        f"{total / 1e6:.1f} M characters, "
        f"{chunks:,} chunks at 1000/200. Output identical to LangChain's: **{identical}**.",
        "",
        "| splitter | s | M chars/s | speed-up |",
        "|---|---:|---:|---:|",
        f"| LangChain RecursiveCharacterTextSplitter | {langchain_seconds:.2f} | "
        f"{total / langchain_seconds / 1e6:.2f} | 1.00x |",
        f"| corpusbuild RecursiveSplitter | {our_seconds:.2f} | {total / our_seconds / 1e6:.2f} | "
        f"{langchain_seconds / our_seconds:.1f}x |",
        "",
    ]


def indexer_corpus(args) -> Path:
    """The PubMed benchmark file's corpus (8 shards), built once."""
    source = args.work / "pubmed25n0001.xml.gz"
    if not source.exists():
        write_scaled_pubmed(sorted((REPO / "samples" / "pubmed").iterdir()), source, RECORDS_PER_FILE, 40_000_000)
    corpus = args.work / "indexer-corpus"
    if not (corpus / "build.json").is_file():
        subprocess.run(ours([source], corpus, 2), check=True, cwd=REPO)
    return corpus


def small_bm25_sections(args) -> list[str]:
    """`indexer bm25` on three small PubMed corpora (real records under new PMIDs), 2 shards each."""
    import indexer_bench

    corpora = []
    for records in (300, 3_000, 12_000):
        source = args.work / f"small-bm25-{records}.xml.gz"
        if not source.exists():
            write_scaled_pubmed(sorted((REPO / "samples" / "pubmed").iterdir()), source, records, 60_000_000)
        corpus = args.work / f"small-bm25-{records}"
        if not (corpus / "build.json").is_file():
            subprocess.run(ours([source], corpus, 1, shards=2), check=True, cwd=REPO)
        corpora.append(corpus)
    print("indexer: bm25 on small corpora", flush=True)
    return indexer_bench.small_bm25_section(corpora, args.work, args.repeats)


def indexer_sections(args) -> list[str]:
    """BM25, embedding and FAISS numbers on the PubMed benchmark file's snippets."""
    import indexer_bench

    corpus = indexer_corpus(args)
    print("indexer: bm25", flush=True)
    lines = indexer_bench.bm25_section(corpus, args.work, args.repeats)
    print("indexer: embedding", flush=True)
    return lines + indexer_bench.embedding_section(corpus, 2_000)


def feeding_sections(args) -> list[str]:
    """indexer dense's feeding pipeline on the indexer benchmark corpus: host side against the bare
    tokenizer (null model), and CPU embedding before and after it."""
    import feeding_bench

    corpus = indexer_corpus(args)
    print("feeding: host side", flush=True)
    lines = feeding_bench.feeding_section(corpus, args.work, repeats=3)
    print("feeding: CPU embedding", flush=True)
    return lines + feeding_bench.cpu_embedding_section(corpus)


def demo_root() -> Path:
    """The demo corpus root (`make demo`), built first if any of its dense indexes is missing."""
    root = REPO / "build" / "demo"
    if not all(
        (root / source / "dense-minilm" / "build.json").is_file() for source in ("pubmed", "wikipedia", "pubmedqa")
    ):
        subprocess.run([sys.executable, "-m", "demo.run", "--out", str(root)], check=True, cwd=REPO)
    return root


def searchd_sections(args) -> list[str]:
    """searchd over the demo corpus root (built by `make demo`, with its indexes)."""
    import searchd_bench

    return searchd_bench.searchd_section(demo_root())


def refkit_sections(args) -> list[str]:
    """refkit's commands against searchd over the demo corpus root."""
    import refkit_bench

    return refkit_bench.refkit_section(demo_root(), args.work / "refkit")


def flood_sections(args) -> list[str]:
    """searchd's memory under undecodable requests, against a bare grpcio server with and without the fix."""
    import flood_bench

    return flood_bench.flood_section(demo_root())


def hostile_sections(args) -> list[str]:
    """searchd's HTTP side under floods, hang-ups, non-reading clients and idle sockets at once."""
    import hostile_bench

    return hostile_bench.hostile_section(demo_root(), args.work / "hostile")


def noise_sections(args) -> list[str]:
    """refkit noise on real question sets over the demo root plus the BioASQ gold snippets: sense, hard
    negatives, leak rate, calibration, and the sample judged by hand."""
    import noise_bench

    return noise_bench.noise_section(demo_root(), args.work / "noise")


def runners_sections(args) -> list[str]:
    """Search-R1's retrieval server design against searchd over HTTP and gRPC, on the noise bench's realistic
    root and on recombined PubMed with a compressed index."""
    import runners_bench

    return runners_bench.runners_section(demo_root(), args.work / "runners")


def executor_sections(args) -> list[str]:
    """corpusbuild on Ray (private and joined cluster) against the local pool, on the 60k-citation pair."""
    import executor_bench

    return executor_bench.executor_section(pubmed_pair(args.work), args.work / "executor", args.repeats, measure)


def bm25_sharded_sections(args) -> list[str]:
    """indexer bm25 with groups of shards built in parallel against one IndexCollection run, at two sizes."""
    import bm25_sharded_bench

    files = pubmed_pair(args.work)
    corpora = {"42k": args.work / "indexer-corpus", "84k": args.work / "indexer-corpus-2x"}
    for inputs, corpus in zip((files[:1], files), corpora.values(), strict=True):
        if not (corpus / "build.json").is_file():
            subprocess.run(ours(inputs, corpus, 2), check=True, cwd=REPO)
    return bm25_sharded_bench.bm25_sharded_section(corpora, args.work / "bm25-sharded", args.repeats)


def scale_sections(args) -> list[str]:
    """Per-core rates measured now, multiplied out to 2026 PubMed and MedCorp on N nodes with M GPUs."""
    import scale_model

    files = pubmed_pair(args.work)
    corpus = args.work / "indexer-corpus-2x"
    if not (corpus / "build.json").is_file():
        subprocess.run(ours(files, corpus, 2), check=True, cwd=REPO)
    return scale_model.scale_section(files[0], corpus, args.work)


def retrieval_scale_sections(args) -> list[str]:
    """100k to 2M snippets built, indexed (BM25 + IVF on real-text vectors) and served: costs, recall,
    latency, memory, and MedCorp's sizing from measured bytes."""
    import scale_retrieval

    return scale_retrieval.retrieval_scale_section(args.work / "retrieval-scale")


SECTIONS = (
    "pubmed",
    "wikipedia",
    "chunker",
    "indexer",
    "bm25-small",
    "feeding",
    "searchd",
    "reload-memory",
    "refkit",
    "flood",
    "hostile",
    "noise",
    "runners",
    "executor",
    "bm25-sharded",
    "scale",
    "retrieval-scale",
    "compressed-dense",
    "multilingual",
    "daily-update",
    "reader-agreement",
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "benchmarks.md")
    parser.add_argument("--work", type=Path, default=REPO / "bench" / "work")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--only", choices=SECTIONS, action="append")
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    wanted = args.only or list(SECTIONS)
    lines = [
        "# Benchmarks",
        "",
        "Written by `make bench` (bench/run_benchmarks.py); numbers from the last run on the machine below.",
        "",
        f"- machine: {os.cpu_count()} cores, {cpu_model()}; Python {platform.python_version()}",
        f"- libraries: lxml {version('lxml')}, ftfy {version('ftfy')}, langchain-text-splitters "
        f"{version('langchain-text-splitters')}, pubmed-parser {version('pubmed-parser')}, isal {version('isal')}, "
        f"mwparserfromhell {version('mwparserfromhell')}, pyserini {version('pyserini')}, faiss-cpu "
        f"{version('faiss-cpu')}, torch {version('torch')}, transformers {version('transformers')}",
        f"- best of {args.repeats} runs each, runs interleaved; single-core rows pinned to one CPU; "
        "wall time of the whole process (start-up included); peak RSS is the largest process's (wait4)",
        "",
    ]
    if "pubmed" in wanted:
        lines += pubmed_section(args)
    if "wikipedia" in wanted:
        lines += wikipedia_section(args)
    if "chunker" in wanted:
        lines += chunker_section()
    if "indexer" in wanted:
        lines += indexer_sections(args)
    if "bm25-small" in wanted:
        lines += small_bm25_sections(args)
    if "feeding" in wanted:
        lines += feeding_sections(args)
    if "searchd" in wanted:
        lines += searchd_sections(args)
    if "reload-memory" in wanted:
        import reload_bench

        lines += reload_bench.reload_section(args.work / "reload-memory")
    if "refkit" in wanted:
        lines += refkit_sections(args)
    if "flood" in wanted:
        lines += flood_sections(args)
    if "hostile" in wanted:
        lines += hostile_sections(args)
    if "noise" in wanted:
        lines += noise_sections(args)
    if "runners" in wanted:
        lines += runners_sections(args)
    if "executor" in wanted:
        lines += executor_sections(args)
    if "bm25-sharded" in wanted:
        lines += bm25_sharded_sections(args)
    if "scale" in wanted:
        lines += scale_sections(args)
    if "retrieval-scale" in wanted:
        lines += retrieval_scale_sections(args)
    if "compressed-dense" in wanted:
        import compressed_dense

        lines += compressed_dense.compressed_dense_section(args.work / "compressed-dense")
    if "daily-update" in wanted:
        import update_bench

        lines += update_bench.daily_update_section(args.work)
    if "multilingual" in wanted:
        import multilingual_bench

        lines += multilingual_bench.multilingual_section(args.work)
    if "reader-agreement" in wanted:
        import reader_agreement

        lines += reader_agreement.reader_agreement_section(args.work / "reader-agreement")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines), encoding="utf-8")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
