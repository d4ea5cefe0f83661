"""PubMed files of distinct citations made of real sentences, for benchmarks at millions of snippets.

Repeating real records under new PMIDs (pubmed_scaleup) keeps every byte real but makes thousands of
identical texts: fine for parse and merge rates, useless for an ANN index, where identical vectors fall
into the same inverted list and make any recall look perfect. Here each new citation takes the
metadata of a real record (round-robin) and a seed abstract drawn at random (seeded); its title is the
seed's, and its abstract has as many sentences as the seed, each taken from the seed or one of the seed's
nearest abstracts (TF-IDF cosine over the bundled abstracts). So words, sentences and lengths are real and
an abstract stays on one topic, as PubMed's do; the topics themselves are the ~700 bundled abstracts'
neighbourhoods, far fewer than PubMed's. (Sentences drawn from anywhere destroy the topical clusters
that IVF indexes rely on: recall@10 at 128 of 1,024 lists fell to 0.82 on such text.)
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Sequence
from pathlib import Path
from xml.sax.saxutils import escape

import numpy as np
from lxml import etree
from pubmed_scaleup import FOOTER, HEADER, load_template_articles

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9(])")
_HOLES = ("@@PMID@@", "@@TITLE@@", "@@ABSTRACT@@")
NEIGHBOURS = 8  # an abstract's sentences come from it and its 7 nearest abstracts


def _nearest(abstracts: list[str], count: int) -> list[list[int]]:
    """Each abstract's `count` nearest abstracts (itself first) by TF-IDF cosine."""
    from sklearn.feature_extraction.text import TfidfVectorizer

    vectors = TfidfVectorizer(sublinear_tf=True, stop_words="english").fit_transform(abstracts)
    similarity = (vectors @ vectors.T).toarray()
    np.fill_diagonal(similarity, np.inf)
    return np.argsort(-similarity, axis=1, kind="stable")[:, :count].tolist()


def _abstract_text(article) -> str:
    return " ".join(
        "".join(part.itertext()) for part in article.iterfind("MedlineCitation/Article/Abstract/AbstractText")
    )


class SentencePool:
    """Real titles, sentences and sentences-per-abstract counts from PubMed XML and BEIR corpus files."""

    def __init__(self, pubmed_files: Sequence[Path], beir_corpora: Sequence[Path]):
        self.templates = load_template_articles(pubmed_files)
        abstracts, self.titles = [], []
        for article in self.templates:
            self.titles.append("".join(article.find("MedlineCitation/Article/ArticleTitle").itertext()).strip())
            abstracts.append(_abstract_text(article))
        for corpus in beir_corpora:
            for line in corpus.read_bytes().splitlines():
                record = json.loads(line)
                self.titles.append(record["title"].strip())
                abstracts.append(record["text"])
        split = [[s.strip() for s in _SENTENCE_END.split(" ".join(a.split())) if s.strip()] for a in abstracts]
        kept = [i for i, sentences in enumerate(split) if sentences]
        self.abstracts = [split[i] for i in kept]
        # PubMedQA's abstracts come without titles: their first sentence stands in
        self.titles = [self.titles[i] or split[i][0] for i in kept]
        self.sentences = [sentence for sentences in self.abstracts for sentence in sentences]
        self.neighbours = _nearest(abstracts=[" ".join(sentences) for sentences in self.abstracts], count=NEIGHBOURS)
        self._shapes = [self._shape(article) for article in self.templates]

    @staticmethod
    def _shape(article) -> list[str]:
        """The record's XML with holes for the PMID, title and abstract, split at the holes."""
        clone = etree.fromstring(etree.tostring(article))
        clone.find("MedlineCitation/PMID").text = _HOLES[0]
        clone.find("MedlineCitation/Article/ArticleTitle").text = _HOLES[1]
        for child in list(clone.find("MedlineCitation/Article/ArticleTitle")):
            child.getparent().remove(child)
        article_node = clone.find("MedlineCitation/Article")
        for abstract in article_node.iterfind("Abstract"):
            article_node.remove(abstract)
        abstract = etree.SubElement(article_node, "Abstract")
        etree.SubElement(abstract, "AbstractText").text = _HOLES[2]
        text = etree.tostring(clone, encoding="unicode")
        return re.split("@@(?:PMID|TITLE|ABSTRACT)@@", text)

    def write_file(self, path: Path, first_pmid: int, count: int, seed: int) -> None:
        """`count` citations with PMIDs first_pmid.. into one PubmedArticleSet file."""
        rng = random.Random(seed)
        with open(path, "w", encoding="utf-8") as out:
            out.write(HEADER.decode())
            for offset in range(count):
                before, between, after, end = self._shapes[(first_pmid + offset) % len(self._shapes)]
                seed = rng.randrange(len(self.abstracts))
                near = self.neighbours[seed]
                sentences = [rng.choice(self.abstracts[rng.choice(near)]) for _ in self.abstracts[seed]]
                out.write(
                    f"{before}{first_pmid + offset}{between}{escape(self.titles[seed])}{after}"
                    f"{escape(' '.join(sentences))}{end}\n"
                )
            out.write(FOOTER.decode())
