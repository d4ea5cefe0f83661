"""The entity vocabulary refkit rewrites questions with: the lexicon and where its names come from (MeSH, clinicians'
dictionaries, the served texts, INN stems, gene symbols), and the matchers that find them in text."""
