"""`searchd` command line."""

from medsnip.pending import not_built_yet


def main() -> None:
    not_built_yet("searchd", "the gRPC hybrid-search daemon lands with the searchd issue")
