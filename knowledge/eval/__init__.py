"""Evaluation of the pipeline on labelled questions: one QA file, a suite of corpora, the simplest peer.

It may import every stage; no stage imports it."""
