"""`refkit`: build a curation benchmark (CRAB/BRAGE style) for your own queries through searchd.

    refkit collect QUERIES --server ADDR --k 32 --out refs.jsonl
    refkit label refs.jsonl --qrels qrels.tsv --out labeled.jsonl        (or label by hand)
    refkit lexicon --server ADDR --out lexicon.tsv
    refkit noise QUERIES --server ADDR --lexicon lexicon.tsv --seed 13 --refs refs.jsonl --out noise.jsonl
    refkit assemble --relevant labeled.jsonl --noise noise.jsonl --n-relevant 2..4 --n-irrelevant 3..6 \\
        --seed 13 --out items.jsonl
    refkit score items.jsonl responses.jsonl

Every command writes its output whole or not at all, and exits 1 with a message naming the file,
line and field when an input is unusable (3, naming the address, when the server does not answer).
"""

from refkit.cli import collection, curation, noise, readers, vocabulary  # noqa: F401  (each registers its commands)
from refkit.cli.common import main
from refkit.cli.vocabulary import clinical_names_line

__all__ = ["clinical_names_line", "main"]
