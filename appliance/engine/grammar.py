"""Structured output: JSON schemas to llama.cpp grammars (GBNF), through llama-cpp-python's converter."""

from __future__ import annotations

import json


def schema_to_grammar(schema: dict) -> str:
    """The GBNF grammar (start rule `root`) of a JSON schema; raises ValueError for schemas it cannot take."""
    from llama_cpp.llama_grammar import json_schema_to_gbnf

    try:
        return json_schema_to_gbnf(json.dumps(schema))
    except Exception as e:  # noqa: BLE001 - the converter raises plain exceptions for unsupported schemas
        raise ValueError(f"unsupported JSON schema: {e}") from None


def json_object_grammar() -> str:
    """Any JSON object (OpenAI's response_format {"type": "json_object"})."""
    return schema_to_grammar({"type": "object"})
