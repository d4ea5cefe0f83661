"""`refkit` command line."""

from medsnip.pending import not_built_yet


def main() -> None:
    not_built_yet("refkit", "reference collection and noise generation land with the refkit issue")
