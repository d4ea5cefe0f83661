"""refkit: reproducible reference collection, entity-substitution noise, benchmark assembly and
citation scoring, as a client of searchd (it never opens index files)."""

from medsnip import silence_grpc_core

silence_grpc_core()
