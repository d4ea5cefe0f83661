"""MedRAG's corpus scripts (github.com/Teddy-XiongGZ/MedRAG, src/data/{pubmed,textbooks,statpearls,
wikipedia}.py) re-expressed as plain functions over one input each, so tests can run their logic on
the bundled samples and compare with `corpusbuild --medrag`. Written from the scripts' behaviour,
step by step, with the same libraries they use (LangChain's RecursiveCharacterTextSplitter, the
standard library's ElementTree, `re`), and independent of corpusbuild's own code."""

from __future__ import annotations

import gzip
import re
import xml.etree.ElementTree as ET


def medrag_concat(title: str, content: str) -> str:
    title, content = title.strip(), content.strip()
    return title + (" " if title.endswith((".", "?", "!")) else ". ") + content


def _splitter():
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    return RecursiveCharacterTextSplitter(chunk_size=1000, chunk_overlap=200)


def pubmed_rows(path) -> list[dict]:
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as handle:
        lines = handle.read().split("\n")
    rows, title, abstract, pmid = [], "", "", None
    for raw in lines:
        line = raw.strip()
        if line == "<Article>" or line.startswith("<Article "):
            title, abstract = "", ""
        elif line == "</Article>":
            if abstract.strip() == "":
                continue
            rows.append(
                {
                    "id": "PMID:" + str(pmid),
                    "title": title,
                    "content": abstract,
                    "contents": medrag_concat(title, abstract),
                }
            )
        if line.startswith("<PMID"):
            pmid = line.strip("</PMID>").split(">")[-1]
        if line.startswith("<ArticleTitle>"):
            title = line[14:-15]
        if line.startswith("<AbstractText"):
            text = "".join(line[13:-15].split(">")[1:])
            abstract = text if len(abstract) == 0 else abstract + " " + text
    return rows


def textbook_rows(path) -> list[dict]:
    name = path.name
    with open(path) as handle:
        texts = _splitter().split_text(handle.read().strip())
    title = name.strip(".txt")  # noqa: B005 - the script's own call
    return [
        {
            "id": name.replace(".txt", "") + "_" + str(i),
            "title": title,
            "content": re.sub(r"\s+", " ", text),
            "contents": medrag_concat(title, re.sub(r"\s+", " ", text)),
        }
        for i, text in enumerate(texts)
    ]


def _text(element) -> str:
    text = (element.text or "").strip()
    for child in element:
        text += (" " if len(text) else "") + _text(child)
        if child.tail and len(child.tail.strip()) > 0:
            text += (" " if len(text) else "") + child.tail.strip()
    return text.strip()


def _is_subtitle(element) -> bool:
    if element.tag != "p" or len(list(element)) != 1 or list(element)[0].tag != "bold":
        return False
    tail = list(element)[0].tail
    return not (tail and len(tail.strip()) > 0)


def statpearls_rows(path) -> list[dict]:
    fname = path.name.replace(".nxml", "")
    root = ET.parse(path).getroot()
    title = root.find(".//title").text
    rows: list[dict] = []
    j = 0

    def row(row_id, row_title, content):
        return {"id": row_id, "title": row_title, "content": content, "contents": medrag_concat(row_title, content)}

    for sec in root.findall(".//sec"):
        sec_title = sec.find("./title").text.strip()
        prefix = " -- ".join([title, sec_title])
        last_text = last = last_node = None
        for ch in sec:
            if _is_subtitle(ch):
                last_text = last = None
                prefix = " -- ".join(prefix.split(" -- ")[:2] + [_text(ch)])
            elif ch.tag == "p":
                current = _text(ch)
                if len(current) < 200 and last_text is not None and len(last_text + current) < 1000:
                    last_text = " ".join([last["content"], current])
                    last = row(last["id"], last["title"], last_text)
                    rows[-1] = last
                else:
                    last_text = current
                    last = row(f"{fname}_{j}", prefix, current)
                    rows.append(last)
                    j += 1
            elif ch.tag == "list":
                items = [_text(c) for c in ch]
                if last_text is not None and len(" ".join(items) + last_text) < 1000:
                    last_text = " ".join([last["content"]] + items)
                    last = row(last["id"], last["title"], last_text)
                    rows[-1] = last
                elif len(" ".join(items)) < 1000:
                    last_text = " ".join(items)
                    last = row(f"{fname}_{j}", prefix, last_text)
                    rows.append(last)
                    j += 1
                else:
                    last_text = last = None
                    for item in items:
                        rows.append(row(f"{fname}_{j}", prefix, item))
                        j += 1
                if last_node is not None and _is_subtitle(last_node):
                    prefix = " -- ".join([title, sec_title])
            last_node = ch
    return rows


def wikipedia_rows(page_id: str, title: str, text: str) -> list[dict]:
    """MedRAG's chunking of one article's text (the script reads it from Hugging Face's dataset)."""
    texts = _splitter().split_text(text.strip())
    return [
        {
            "id": f"{page_id}_{j}",
            "title": title,
            "content": re.sub(r"\s+", " ", t),
            "contents": medrag_concat(title, re.sub(r"\s+", " ", t)),
        }
        for j, t in enumerate(texts)
    ]
