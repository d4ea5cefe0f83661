"""`make demo`: the main job on the bundled real samples (build, index, serve, query, refkit). A
repository-level package: no stage imports it."""


def shortened(text: str, width: int) -> str:
    """`text` cut at a word boundary to at most `width` characters, an ellipsis where it was cut (a chunk's
    first words may be a word's end: a chunk can begin mid-word, the table never cuts one)."""
    import textwrap

    return textwrap.shorten(text, width, placeholder=" …")
