"""Retrieval: a question to ranked excerpts (dense + lexical, fused) and the not-covered gate."""
