"""searchd for the runners people already use: MedRAG/MIRAGE's `RetrievalSystem`, a LangChain retriever and a
LlamaIndex retriever. Each one calls a running searchd (searchd.client) and maps its hits to the runner's
own objects; none loads an index. A new runner goes here, as one module over `hits.py`."""
