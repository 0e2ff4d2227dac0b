"""The index: chunks, their embeddings (Chroma), their texts and citation facts, the lexical index
and the manifest (one SQLite file), opened together as a KnowledgeBase."""
