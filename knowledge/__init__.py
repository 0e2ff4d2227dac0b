"""Documents → chunks → index → retrieval → answers, one subpackage per stage.

    text/      words of English and Chinese: stems, IDF terms, everyday words, near-copies
    loaders/   files → sections of text with their place in the document
    index/     chunking, embeddings, the vector store, the manifest, chunk texts, the lexical index
    ingest/    a folder → the index: walk, load, chunk, embed, write, report, repair
    retrieve/  a question → ranked excerpts (dense + lexical, fused) and the not-covered gate
    answer/    excerpts → a quoted answer, and the grounding check of any answer
    eval/      measuring the stages above on labelled questions; nothing above imports it
    data/      the sample knowledge base and the question files (not code)

`errors` and `threads` are shared by every stage. A stage imports only the stages listed above it
(tests/test_architecture.py checks it).
"""
