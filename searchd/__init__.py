"""searchd: the gRPC search daemon over a corpus root: BM25, dense and hybrid (RRF) queries
micro-batched across clients, one loaded generation at a time with live reloads, health, reflection
and admission control."""
