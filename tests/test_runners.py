"""The runner adapters (searchd.runners) driven by their real libraries against a real searchd: MedRAG's
RetrievalSystem call equals `searchd query --fusion medrag`, a LangChain chain and a LlamaIndex query engine
run on the retriever, each hit carrying our id, title, corpus and per-retriever ranks."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from conftest import SAMPLES
from medsnip.queries import query_texts
from searchd.cli import main as searchd_main
from searchd.client import SearchClient
from searchd.runners.medrag import RetrievalSystem

QUESTIONS = list(query_texts(SAMPLES / "ir" / "pubmedqa-beir" / "queries.tsv").values())
# the test root's names for MedRAG's: its dense index is MiniLM (a MedCorp root serves dense-medcpt etc.)
RETRIEVERS = {"BM25": ("bm25",), "RRF-2": ("bm25", "dense-minilm"), "MedCPT": ("dense-medcpt",)}
CORPORA = {"PubMedQA": ("pubmedqa",), "Both": ("pubmedqa", "textbooks")}


@pytest.fixture
def server(search_root_server):
    return search_root_server[1]


def searchd_query(address: str, question: str, *options) -> dict:
    result = CliRunner().invoke(
        searchd_main, ["query", question, "--server", address, "--json", *map(str, options)], catch_exceptions=False
    )
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


@pytest.mark.parametrize(("retriever", "corpus"), [("RRF-2", "PubMedQA"), ("BM25", "Both")])
def test_medrag_retrieve_equals_searchd_query_with_medrag_fusion(server, retriever, corpus):
    """`RetrievalSystem(...).retrieve(question, k=32, rrf_k=100)` returns `searchd query --fusion medrag
    --rrf-k 100`'s hits: the same ids and scores in order, MedRAG's snippet shape (id, title, content)."""
    system = RetrievalSystem(retriever, corpus, server=server, retrievers=RETRIEVERS, corpora=CORPORA)
    for question in QUESTIONS[:3]:
        snippets, scores = system.retrieve(question, k=32, rrf_k=100)
        options = ["--fusion", "medrag", "--rrf-k", 100, "--k", 32]
        for name in RETRIEVERS[retriever]:
            options += ["--retrievers", name]
        for name in CORPORA[corpus]:
            options += ["--corpora", name]
        expected = searchd_query(server, question, *options)["hits"]
        assert [s["id"] for s in snippets] == [h["id"] for h in expected] and 0 < len(snippets) <= 32
        assert scores == pytest.approx([h["score"] for h in expected])
        assert all(set(s) == {"id", "title", "content"} and s["content"] for s in snippets)
    ids, _ = system.retrieve(QUESTIONS[0], k=5, id_only=True)
    assert ids == [{"id": s["id"]} for s in system.retrieve(QUESTIONS[0], k=5)[0]]
    system.close()


def test_medrag_names_the_server_cannot_serve_are_refused(server):
    with pytest.raises(ValueError, match="unknown retriever_name 'ColBERT'; known: BM25, Contriever"):
        RetrievalSystem("ColBERT", "Textbooks", server=server)
    with pytest.raises(ValueError, match="does not serve corpus 'statpearls'"):
        RetrievalSystem("BM25", "StatPearls", server=server)
    with pytest.raises(ValueError, match="no dense-medcpt index for 'pubmedqa'; it has bm25, dense-minilm"):
        RetrievalSystem("MedCPT", "PubMedQA", server=server, retrievers=RETRIEVERS, corpora=CORPORA)
    with pytest.raises(TypeError, match="question must be a str"):
        RetrievalSystem("BM25", "PubMedQA", server=server, retrievers=RETRIEVERS, corpora=CORPORA).retrieve(["a"])


def test_a_langchain_chain_runs_on_the_searchd_retriever(server):
    """LCEL: the retriever's documents fill a prompt that a model answers. Each Document is a searchd hit:
    its id, text, and metadata with title, corpus and each retriever's rank."""
    from langchain_core.language_models.fake import FakeListLLM
    from langchain_core.output_parsers import StrOutputParser
    from langchain_core.prompts import PromptTemplate
    from langchain_core.runnables import RunnablePassthrough

    from searchd.runners.langchain import SearchdRetriever

    retriever = SearchdRetriever(address=server, k=4, corpora=["pubmedqa"])
    question = QUESTIONS[5]
    documents = retriever.invoke(question)
    with SearchClient(server) as client:
        hits = client.search(question, k=4, corpora=["pubmedqa"]).hits
    assert [d.id for d in documents] == [hit.id for hit in hits]
    assert [d.page_content for d in documents] == [hit.content for hit in hits]
    first = documents[0].metadata
    assert first["title"] == hits[0].title and first["corpus"] == "pubmedqa" and first["rank"] == 1
    assert {r["retriever"] for r in first["retrievers"]} == {"bm25", "dense-minilm"}

    prompt = PromptTemplate.from_template("Answer from the context.\nContext:\n{context}\nQuestion: {question}")
    context = {
        "context": retriever | (lambda found: "\n\n".join(d.page_content for d in found)),
        "question": RunnablePassthrough(),
    }
    filled = (context | prompt).invoke(question).to_string()
    assert hits[0].content in filled and hits[3].content in filled
    chain = context | prompt | FakeListLLM(responses=["yes"]) | StrOutputParser()
    assert chain.invoke(question) == "yes"
    assert chain.batch(QUESTIONS[:3]) == ["yes"] * 3


def test_a_llamaindex_query_engine_runs_on_the_searchd_retriever(server):
    """RetrieverQueryEngine over the retriever with LlamaIndex's MockLLM (which answers with the prompt it
    was given): the answer holds the retrieved texts, and the source nodes are searchd's hits and scores."""
    from llama_index.core.llms import MockLLM
    from llama_index.core.query_engine import RetrieverQueryEngine

    from searchd.runners.llamaindex import SearchdRetriever

    question = QUESTIONS[7]
    engine = RetrieverQueryEngine.from_args(SearchdRetriever(address=server, k=3), llm=MockLLM())
    response = engine.query(question)
    with SearchClient(server) as client:
        hits = client.search(question, k=3).hits
    assert [n.node.node_id for n in response.source_nodes] == [hit.id for hit in hits]
    assert [n.score for n in response.source_nodes] == pytest.approx([hit.score for hit in hits])
    node = response.source_nodes[0].node
    assert node.metadata["title"] == hits[0].title and node.metadata["doc_id"] == hits[0].doc_id
    assert [r["rank"] for r in node.metadata["retrievers"]] == [r.rank for r in hits[0].retrievers]
    assert hits[0].content[:200] in str(response) and question in str(response)
    assert "retrievers" not in node.get_content(metadata_mode="llm")  # provenance stays out of the prompt


class MedRAGCallPattern:
    """What MedRAG's `MedRAG` (src/medrag.py, github.com/Teddy-XiongGZ/MedRAG at 7599a72) does with the two names it
    imports, call for call, and nothing else: the constructor builds `RetrievalSystem(retriever_name, corpus_name,
    db_dir, cache=corpus_cache, HNSW=HNSW)` (the module's name, which patch_medrag replaced), `medrag_answer`
    retrieves with `retrieve(question, k=k, rrf_k=rrf_k)`, or, given `snippets_ids`, builds
    `DocExtracter(db_dir=db_dir, cache=True, corpus_name=corpus_name)` and calls `extract(snippets_ids[:k])`, then
    writes each snippet into its prompt as `Document [i] (Title: ...) ...`; its LLM is a stub here."""

    def __init__(self, module, retriever_name: str, corpus_name: str, db_dir: str = "./corpus"):
        self.module, self.corpus_name, self.db_dir, self.docExt = module, corpus_name, db_dir, None
        self.retrieval_system = module.RetrievalSystem(retriever_name, corpus_name, db_dir, cache=False, HNSW=False)
        self.prompts: list[str] = []

    def answer(self, question, options=None, k=32, rrf_k=100, snippets_ids=None):
        if snippets_ids is not None:
            if self.docExt is None:
                self.docExt = self.module.DocExtracter(db_dir=self.db_dir, cache=True, corpus_name=self.corpus_name)
            snippets, scores = self.docExt.extract(snippets_ids[:k]), []
        else:
            snippets, scores = self.retrieval_system.retrieve(question, k=k, rrf_k=rrf_k)
        contexts = [f"Document [{i}] (Title: {s['title']}) {s['content']}" for i, s in enumerate(snippets)]
        self.prompts.append("\n".join(contexts))
        return '{"step_by_step_thinking": "stub", "answer_choice": "A"}', snippets, scores


def test_medrag_call_pattern_runs_on_the_patched_module_with_the_address_from_the_environment(server, monkeypatch):
    """MedRAG's own calls (MedRAGCallPattern) on a module patched by patch_medrag, searchd found through
    $SEARCHD_ADDRESS: positional constructor arguments, retrieve(question, k, rrf_k) equal to `searchd query
    --fusion medrag`, DocExtracter serving `snippets_ids=` from the root by id, the name maps extending the
    defaults (MedRAG's BM25 still known beside the test root's names)."""
    import types

    from searchd.runners.medrag import patch_medrag

    monkeypatch.setenv("SEARCHD_ADDRESS", server)
    module = types.ModuleType("src.medrag")
    patch_medrag(module, retrievers={"RRF-2": ("bm25", "dense-minilm")}, corpora=CORPORA)
    medrag = MedRAGCallPattern(module, "RRF-2", "PubMedQA")
    answer, snippets, scores = medrag.answer(QUESTIONS[4], k=8, rrf_k=100)
    options = ["--fusion", "medrag", "--rrf-k", 100, "--k", 8, "--retrievers", "bm25", "--retrievers", "dense-minilm"]
    expected = searchd_query(server, QUESTIONS[4], *options, "--corpora", "pubmedqa")
    assert [s["id"] for s in snippets] == [h["id"] for h in expected["hits"]] and len(snippets) == 8
    assert scores == pytest.approx([h["score"] for h in expected["hits"]])
    assert medrag.prompts[-1].startswith(f"Document [0] (Title: {snippets[0]['title']}) {snippets[0]['content']}")
    extracted_answer, extracted, no_scores = medrag.answer(
        QUESTIONS[4], k=3, snippets_ids=[{"id": s["id"]} for s in snippets]
    )
    assert [s["id"] for s in extracted] == [s["id"] for s in snippets[:3]] and no_scores == []
    assert extracted == [{k: s[k] for k in ("id", "title", "content")} for s in snippets[:3]]
    both = MedRAGCallPattern(module, "BM25", "Both")  # BM25 is one of MedRAG's names, kept beside the added ones
    assert both.retrieval_system.retrievers == ["bm25"] and both.answer(QUESTIONS[4], k=4)[1]
    with pytest.raises(KeyError, match="pubmedqa:nope"):
        medrag.docExt.extract(["pubmedqa:nope"])


def test_mirage_questions_through_medrag_write_the_files_mirages_evaluate_reads(server, tmp_path, monkeypatch):
    """searchd.runners.mirage.run_mirage asks MedRAG (its call pattern) MIRAGE's questions and writes
    RESULTS/<dataset>/rag_<k>/<llm>/<corpus>/<retriever>/test_<id>.json, each a list whose first item holds the
    answer_choice MIRAGE's evaluate.py parses; a second run asks nothing again."""
    import types

    from searchd.runners.medrag import patch_medrag
    from searchd.runners.mirage import run_mirage

    monkeypatch.setenv("SEARCHD_ADDRESS", server)
    ids = list(query_texts(SAMPLES / "ir" / "pubmedqa-beir" / "queries.tsv"))[:3]
    benchmark = tmp_path / "benchmark.json"  # MIRAGE's shape: dataset -> id -> question, options, answer
    options = {"A": "yes", "B": "no", "C": "maybe"}
    items = {i: {"question": q, "options": options, "answer": "A"} for i, q in zip(ids, QUESTIONS[:3], strict=True)}
    benchmark.write_text(json.dumps({"pubmedqa": items}))
    module = types.ModuleType("src.medrag")
    patch_medrag(module, retrievers=RETRIEVERS, corpora=CORPORA)
    medrag = MedRAGCallPattern(module, "RRF-2", "PubMedQA")
    names = ("stub/llm", "PubMedQA", "RRF-2")
    files = run_mirage(medrag, benchmark, "pubmedqa", tmp_path / "prediction", *names, k=4, rrf_k=100)
    folder = tmp_path / "prediction" / "pubmedqa" / "rag_4" / "stub" / "llm" / "PubMedQA" / "RRF-2"
    assert files == [folder / f"test_{i}.json" for i in sorted(ids)]
    for path in files:
        [answer] = json.loads(path.read_text())
        assert answer.split('"answer_choice": "')[-1].strip().startswith("A")
    assert len(medrag.prompts) == 3
    run_mirage(medrag, benchmark, "pubmedqa", tmp_path / "prediction", *names, k=4, rrf_k=100)
    assert len(medrag.prompts) == 3  # every answer was there: nothing asked again


def test_doc_extracter_asks_no_more_ids_a_call_than_the_server_takes(bm25_root):
    """A server run with a small --max-k takes that many ids per GetSnippets call: DocExtracter reads the bound
    from Info and splits a longer list, the snippets coming back in the order asked."""
    from searchd.launch import start_background_server
    from searchd.runners.medrag import DocExtracter

    process, address = start_background_server(bm25_root, "--max-k", 5)
    try:
        with SearchClient(address) as client:
            ids = [hit.id for hit in client.search("asthma in children", k=5, corpora=["pubmedqa"]).hits]
            ids += [hit.id for hit in client.search("heart failure", k=5, corpora=["textbooks"]).hits]
        wanted = list(reversed(ids)) + ids[:2]  # 12 ids: three calls of at most 5
        extracter = DocExtracter(server=address, cache=False)
        try:
            snippets = extracter.extract(wanted)
        finally:
            extracter.close()
        assert [snippet["id"] for snippet in snippets] == wanted
        assert all(snippet["content"] and snippet["contents"] for snippet in snippets)
    finally:
        process.terminate()
        process.wait(timeout=60)
