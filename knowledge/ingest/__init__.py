"""Ingest: a folder walked, loaded, chunked, embedded and written to the index, incrementally and
crash-safely, with a report of every file."""
