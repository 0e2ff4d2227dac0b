"""Answers from excerpts: the quoted answer (sentences picked verbatim) and the grounding check."""
