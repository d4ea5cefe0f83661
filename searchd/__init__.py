"""searchd: the gRPC search daemon over a corpus root: BM25, dense and hybrid (RRF) queries
micro-batched across clients, one loaded generation at a time with live reloads, health, reflection
and admission control."""

from medsnip import silence_grpc_core

silence_grpc_core()
