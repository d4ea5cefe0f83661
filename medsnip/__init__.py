"""medsnip: shared contracts (snippet schema, build record) used by every stage."""

__version__ = "0.1.0"
