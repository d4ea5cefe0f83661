"""`python -m refkit.cli`: the refkit command."""

from refkit.cli import main

main()
