"""Jobs that run several stages in order (the daily update); each stage stays in its own package."""

from medsnip import silence_grpc_core

silence_grpc_core()
