from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class SearchRequest(_message.Message):
    __slots__ = ("query", "k", "corpora", "retrievers", "depth", "fusion", "return_text", "bm25_k1", "bm25_b", "nprobe", "refine")
    QUERY_FIELD_NUMBER: _ClassVar[int]
    K_FIELD_NUMBER: _ClassVar[int]
    CORPORA_FIELD_NUMBER: _ClassVar[int]
    RETRIEVERS_FIELD_NUMBER: _ClassVar[int]
    DEPTH_FIELD_NUMBER: _ClassVar[int]
    FUSION_FIELD_NUMBER: _ClassVar[int]
    RETURN_TEXT_FIELD_NUMBER: _ClassVar[int]
    BM25_K1_FIELD_NUMBER: _ClassVar[int]
    BM25_B_FIELD_NUMBER: _ClassVar[int]
    NPROBE_FIELD_NUMBER: _ClassVar[int]
    REFINE_FIELD_NUMBER: _ClassVar[int]
    query: str
    k: int
    corpora: _containers.RepeatedScalarFieldContainer[str]
    retrievers: _containers.RepeatedScalarFieldContainer[str]
    depth: int
    fusion: Fusion
    return_text: bool
    bm25_k1: float
    bm25_b: float
    nprobe: int
    refine: int
    def __init__(self, query: _Optional[str] = ..., k: _Optional[int] = ..., corpora: _Optional[_Iterable[str]] = ..., retrievers: _Optional[_Iterable[str]] = ..., depth: _Optional[int] = ..., fusion: _Optional[_Union[Fusion, _Mapping]] = ..., return_text: _Optional[bool] = ..., bm25_k1: _Optional[float] = ..., bm25_b: _Optional[float] = ..., nprobe: _Optional[int] = ..., refine: _Optional[int] = ...) -> None: ...

class Fusion(_message.Message):
    __slots__ = ("method", "rrf_k")
    class Method(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        METHOD_UNSPECIFIED: _ClassVar[Fusion.Method]
        RRF: _ClassVar[Fusion.Method]
        MEDRAG: _ClassVar[Fusion.Method]
    METHOD_UNSPECIFIED: Fusion.Method
    RRF: Fusion.Method
    MEDRAG: Fusion.Method
    METHOD_FIELD_NUMBER: _ClassVar[int]
    RRF_K_FIELD_NUMBER: _ClassVar[int]
    method: Fusion.Method
    rrf_k: int
    def __init__(self, method: _Optional[_Union[Fusion.Method, str]] = ..., rrf_k: _Optional[int] = ...) -> None: ...

class RetrieverHit(_message.Message):
    __slots__ = ("corpus", "retriever", "rank", "score")
    CORPUS_FIELD_NUMBER: _ClassVar[int]
    RETRIEVER_FIELD_NUMBER: _ClassVar[int]
    RANK_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    corpus: str
    retriever: str
    rank: int
    score: float
    def __init__(self, corpus: _Optional[str] = ..., retriever: _Optional[str] = ..., rank: _Optional[int] = ..., score: _Optional[float] = ...) -> None: ...

class Hit(_message.Message):
    __slots__ = ("id", "score", "rank", "title", "content", "source", "doc_id", "retrievers")
    ID_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    RANK_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    DOC_ID_FIELD_NUMBER: _ClassVar[int]
    RETRIEVERS_FIELD_NUMBER: _ClassVar[int]
    id: str
    score: float
    rank: int
    title: str
    content: str
    source: str
    doc_id: str
    retrievers: _containers.RepeatedCompositeFieldContainer[RetrieverHit]
    def __init__(self, id: _Optional[str] = ..., score: _Optional[float] = ..., rank: _Optional[int] = ..., title: _Optional[str] = ..., content: _Optional[str] = ..., source: _Optional[str] = ..., doc_id: _Optional[str] = ..., retrievers: _Optional[_Iterable[_Union[RetrieverHit, _Mapping]]] = ...) -> None: ...

class SearchResponse(_message.Message):
    __slots__ = ("hits", "took_ms", "error")
    HITS_FIELD_NUMBER: _ClassVar[int]
    TOOK_MS_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    hits: _containers.RepeatedCompositeFieldContainer[Hit]
    took_ms: float
    error: str
    def __init__(self, hits: _Optional[_Iterable[_Union[Hit, _Mapping]]] = ..., took_ms: _Optional[float] = ..., error: _Optional[str] = ...) -> None: ...

class BatchSearchRequest(_message.Message):
    __slots__ = ("requests",)
    REQUESTS_FIELD_NUMBER: _ClassVar[int]
    requests: _containers.RepeatedCompositeFieldContainer[SearchRequest]
    def __init__(self, requests: _Optional[_Iterable[_Union[SearchRequest, _Mapping]]] = ...) -> None: ...

class BatchSearchResponse(_message.Message):
    __slots__ = ("responses",)
    RESPONSES_FIELD_NUMBER: _ClassVar[int]
    responses: _containers.RepeatedCompositeFieldContainer[SearchResponse]
    def __init__(self, responses: _Optional[_Iterable[_Union[SearchResponse, _Mapping]]] = ...) -> None: ...

class GetSnippetsRequest(_message.Message):
    __slots__ = ("ids",)
    IDS_FIELD_NUMBER: _ClassVar[int]
    ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, ids: _Optional[_Iterable[str]] = ...) -> None: ...

class Snippet(_message.Message):
    __slots__ = ("id", "title", "content", "contents", "source", "doc_id", "chunk", "meta_json")
    ID_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    CONTENTS_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    DOC_ID_FIELD_NUMBER: _ClassVar[int]
    CHUNK_FIELD_NUMBER: _ClassVar[int]
    META_JSON_FIELD_NUMBER: _ClassVar[int]
    id: str
    title: str
    content: str
    contents: str
    source: str
    doc_id: str
    chunk: int
    meta_json: str
    def __init__(self, id: _Optional[str] = ..., title: _Optional[str] = ..., content: _Optional[str] = ..., contents: _Optional[str] = ..., source: _Optional[str] = ..., doc_id: _Optional[str] = ..., chunk: _Optional[int] = ..., meta_json: _Optional[str] = ...) -> None: ...

class GetSnippetsResponse(_message.Message):
    __slots__ = ("snippets", "missing")
    SNIPPETS_FIELD_NUMBER: _ClassVar[int]
    MISSING_FIELD_NUMBER: _ClassVar[int]
    snippets: _containers.RepeatedCompositeFieldContainer[Snippet]
    missing: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, snippets: _Optional[_Iterable[_Union[Snippet, _Mapping]]] = ..., missing: _Optional[_Iterable[str]] = ...) -> None: ...

class ScanSnippetsRequest(_message.Message):
    __slots__ = ("corpora", "first_chunk_only", "return_text", "page_size")
    CORPORA_FIELD_NUMBER: _ClassVar[int]
    FIRST_CHUNK_ONLY_FIELD_NUMBER: _ClassVar[int]
    RETURN_TEXT_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    corpora: _containers.RepeatedScalarFieldContainer[str]
    first_chunk_only: bool
    return_text: bool
    page_size: int
    def __init__(self, corpora: _Optional[_Iterable[str]] = ..., first_chunk_only: _Optional[bool] = ..., return_text: _Optional[bool] = ..., page_size: _Optional[int] = ...) -> None: ...

class SnippetPage(_message.Message):
    __slots__ = ("corpus", "snippets")
    CORPUS_FIELD_NUMBER: _ClassVar[int]
    SNIPPETS_FIELD_NUMBER: _ClassVar[int]
    corpus: str
    snippets: _containers.RepeatedCompositeFieldContainer[Snippet]
    def __init__(self, corpus: _Optional[str] = ..., snippets: _Optional[_Iterable[_Union[Snippet, _Mapping]]] = ...) -> None: ...

class InfoRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class IndexInfo(_message.Message):
    __slots__ = ("retriever", "path", "lineage_sha256", "build_json", "encoder_json")
    RETRIEVER_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    LINEAGE_SHA256_FIELD_NUMBER: _ClassVar[int]
    BUILD_JSON_FIELD_NUMBER: _ClassVar[int]
    ENCODER_JSON_FIELD_NUMBER: _ClassVar[int]
    retriever: str
    path: str
    lineage_sha256: str
    build_json: str
    encoder_json: str
    def __init__(self, retriever: _Optional[str] = ..., path: _Optional[str] = ..., lineage_sha256: _Optional[str] = ..., build_json: _Optional[str] = ..., encoder_json: _Optional[str] = ...) -> None: ...

class CorpusInfo(_message.Message):
    __slots__ = ("name", "path", "snippets", "shards", "lineage_sha256", "indexes")
    NAME_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    SNIPPETS_FIELD_NUMBER: _ClassVar[int]
    SHARDS_FIELD_NUMBER: _ClassVar[int]
    LINEAGE_SHA256_FIELD_NUMBER: _ClassVar[int]
    INDEXES_FIELD_NUMBER: _ClassVar[int]
    name: str
    path: str
    snippets: int
    shards: int
    lineage_sha256: str
    indexes: _containers.RepeatedCompositeFieldContainer[IndexInfo]
    def __init__(self, name: _Optional[str] = ..., path: _Optional[str] = ..., snippets: _Optional[int] = ..., shards: _Optional[int] = ..., lineage_sha256: _Optional[str] = ..., indexes: _Optional[_Iterable[_Union[IndexInfo, _Mapping]]] = ...) -> None: ...

class InfoResponse(_message.Message):
    __slots__ = ("server_version", "corpora", "retrievers", "encoder_json", "max_k", "max_query_chars", "max_batch", "max_call_seconds", "max_reply_bytes", "max_page_size", "stats_json")
    SERVER_VERSION_FIELD_NUMBER: _ClassVar[int]
    CORPORA_FIELD_NUMBER: _ClassVar[int]
    RETRIEVERS_FIELD_NUMBER: _ClassVar[int]
    ENCODER_JSON_FIELD_NUMBER: _ClassVar[int]
    MAX_K_FIELD_NUMBER: _ClassVar[int]
    MAX_QUERY_CHARS_FIELD_NUMBER: _ClassVar[int]
    MAX_BATCH_FIELD_NUMBER: _ClassVar[int]
    MAX_CALL_SECONDS_FIELD_NUMBER: _ClassVar[int]
    MAX_REPLY_BYTES_FIELD_NUMBER: _ClassVar[int]
    MAX_PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    STATS_JSON_FIELD_NUMBER: _ClassVar[int]
    server_version: str
    corpora: _containers.RepeatedCompositeFieldContainer[CorpusInfo]
    retrievers: _containers.RepeatedScalarFieldContainer[str]
    encoder_json: str
    max_k: int
    max_query_chars: int
    max_batch: int
    max_call_seconds: float
    max_reply_bytes: int
    max_page_size: int
    stats_json: str
    def __init__(self, server_version: _Optional[str] = ..., corpora: _Optional[_Iterable[_Union[CorpusInfo, _Mapping]]] = ..., retrievers: _Optional[_Iterable[str]] = ..., encoder_json: _Optional[str] = ..., max_k: _Optional[int] = ..., max_query_chars: _Optional[int] = ..., max_batch: _Optional[int] = ..., max_call_seconds: _Optional[float] = ..., max_reply_bytes: _Optional[int] = ..., max_page_size: _Optional[int] = ..., stats_json: _Optional[str] = ...) -> None: ...
