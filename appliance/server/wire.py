"""The OpenAI wire format in one place: request models, responses, SSE chunks, error JSON."""

from __future__ import annotations

import json
import time
import uuid
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from appliance.engine.sequence import SamplingParams, Stats


class ApiError(Exception):
    """Raised by routes; rendered in OpenAI's error shape."""

    def __init__(self, status: int, message: str, code: str, type_: str = "invalid_request_error",
                 headers: dict | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.code, self.type, self.headers = status, message, code, type_, headers


def error_body(message: str, code: str, type_: str) -> dict:
    return {"error": {"message": message, "type": type_, "param": None, "code": code}}


class ContentPart(BaseModel):
    """One part of a message's content list ({"type": "text", "text": "…"}); other types are ignored."""

    model_config = ConfigDict(extra="ignore")
    type: str = "text"
    text: str = ""


class Message(BaseModel):
    model_config = ConfigDict(extra="ignore")
    # The roles every chat template takes (appliance.engine.chat_template), stated in the schema.
    role: Literal["system", "user", "assistant", "tool"]
    content: str | list[ContentPart] | None = ""

    def text(self) -> str:
        if isinstance(self.content, list):
            return "".join(p.text for p in self.content if p.type == "text")
        return self.content or ""


class StreamOptions(BaseModel):
    include_usage: bool = False


class JsonSchemaFormat(BaseModel):
    model_config = ConfigDict(extra="ignore")
    name: str = "output"
    schema_: dict = Field(default_factory=dict, alias="schema")


class ResponseFormat(BaseModel):
    """OpenAI's structured output: free text, any JSON object, or JSON that follows a schema."""

    model_config = ConfigDict(extra="ignore")
    type: str = Field("text", pattern="^(text|json_object|json_schema)$")
    json_schema: JsonSchemaFormat | None = None


class ChatRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")
    model: str
    messages: list[Message] = Field(min_length=1)
    stream: bool = False
    max_tokens: int | None = Field(None, ge=1)
    max_completion_tokens: int | None = Field(None, ge=1)
    temperature: float = Field(0.7, ge=0, le=2)
    top_p: float = Field(1.0, gt=0, le=1)
    frequency_penalty: float = Field(0.0, ge=-2, le=2)
    presence_penalty: float = Field(0.0, ge=-2, le=2)
    stop: str | list[str] | None = None
    seed: int | None = None
    user: str | None = None
    stream_options: StreamOptions | None = None
    # Sampling extensions under llama.cpp server's names (vLLM reads top_k and min_p too), so a
    # front-end appliance (engine.backend = "openai") keeps its sampling when this one is its cluster.
    top_k: int = Field(40, ge=0)
    min_p: float = Field(0.05, ge=0, le=1)
    repeat_penalty: float = Field(1.0, gt=0)
    dry_multiplier: float = Field(0.0, ge=0)
    dry_base: float = Field(1.75, ge=1)
    dry_allowed_length: int = Field(2, ge=0)
    ignore_eos: bool = False
    response_format: ResponseFormat | None = None
    grammar: str | None = None  # llama.cpp server's name: a GBNF grammar the answer must follow
    priority: int = Field(0, ge=0, le=1, description="0 interactive; 1 background (batch jobs)")
    # Speculative decoding for this request: false = off, true = the server's default, N = N draft tokens.
    speculative: bool | int | None = Field(None, description="false, true or draft tokens (0-16)")
    # An indexed document to answer from whole (map-reduce over its sections): with appliance-rag the
    # last user message is the question; appliance-summarize summarises it. OpenAI SDK: extra_body.
    document: str | None = Field(None, min_length=1)
    # How appliance-rag writes this answer (the server's `chat.answer_style` when absent); the
    # response says which style answered in `answer_style`. OpenAI SDK: extra_body.
    answer_style: Literal["generate", "quote", "hybrid"] | None = None

    def grammar_text(self) -> str:
        """The grammar this request's output must follow ("" for free text)."""
        from appliance.engine.grammar import json_object_grammar, schema_to_grammar

        fmt = self.response_format
        if fmt is not None and fmt.type == "json_schema":
            if fmt.json_schema is None or not fmt.json_schema.schema_:
                raise ValueError("response_format json_schema needs json_schema.schema")
            return schema_to_grammar(fmt.json_schema.schema_)
        if fmt is not None and fmt.type == "json_object":
            return json_object_grammar()
        return self.grammar or ""

    def params(self, user: str) -> SamplingParams:
        stop = [self.stop] if isinstance(self.stop, str) else list(self.stop or [])
        return SamplingParams(max_tokens=self.max_completion_tokens or self.max_tokens, temperature=self.temperature,
                              top_p=self.top_p, seed=self.seed, stop=stop, user=user,
                              frequency_penalty=self.frequency_penalty, presence_penalty=self.presence_penalty,
                              top_k=self.top_k, min_p=self.min_p, repeat_penalty=self.repeat_penalty,
                              dry_multiplier=self.dry_multiplier, dry_base=self.dry_base,
                              dry_allowed_length=self.dry_allowed_length, ignore_eos=self.ignore_eos,
                              grammar=self.grammar_text(), priority=self.priority,
                              speculative=_draft_tokens(self.speculative))

    def plain_messages(self) -> list[dict]:
        return plain_messages(self.messages)


def _draft_tokens(value: bool | int | None) -> int | None:
    # bool before int: True is an int in Python, and means "the default", not one draft token.
    if value is None or value is True:
        return None
    return 0 if value is False else int(value)


def plain_messages(messages: list[Message]) -> list[dict]:
    """{"role", "content"} dicts with content parts joined to text (what the chat template takes)."""
    return [{"role": m.role, "content": m.text()} for m in messages]


class TokenizeRequest(BaseModel):
    """vLLM's /tokenize for chat messages (rendered with the model's template, generation prompt added)."""

    model_config = ConfigDict(extra="ignore")
    model: str = ""
    messages: list[Message] = Field(min_length=1)  # chat prompts only


class EmbeddingRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")
    input: str | Annotated[list[str], Field(min_length=1, max_length=2048)]
    model: str = ""


def new_id() -> str:
    return "chatcmpl-" + uuid.uuid4().hex[:24]


def usage(stats: Stats | None, prompt_tokens: int = 0, returned_tokens: int | None = None) -> dict:
    """OpenAI's usage: what the model read, and the tokens of what is returned (`returned_tokens`
    where the answer holds more than the model wrote, such as a hybrid answer's quotes)."""
    p = stats.prompt_tokens if stats else prompt_tokens
    c = returned_tokens if returned_tokens is not None else (stats.generated_tokens if stats else 0)
    out = {"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c}
    if stats:
        out["prompt_tokens_details"] = {"cached_tokens": stats.cached_prompt_tokens}
    return out


def completion(cid: str, model: str, text: str, finish: str, use: dict, citations: list | None,
               extra: dict | None = None) -> dict:
    body = {"id": cid, "object": "chat.completion", "created": int(time.time()), "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                         "finish_reason": _finish(finish)}], "usage": use}
    if citations is not None:
        body["citations"] = citations
    body.update(extra or {})
    return body


def chunk(cid: str, model: str, delta: dict, finish: str | None = None, extra: dict | None = None) -> str:
    body = {"id": cid, "object": "chat.completion.chunk", "created": int(time.time()), "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": _finish(finish) if finish else None}]}
    body.update(extra or {})
    return sse(body)


def usage_chunk(cid: str, model: str, use: dict) -> str:
    return sse({"id": cid, "object": "chat.completion.chunk", "created": int(time.time()), "model": model,
                "choices": [], "usage": use})


def sse(body: dict | str) -> str:
    data = body if isinstance(body, str) else json.dumps(body, ensure_ascii=False)
    return f"data: {data}\n\n"


def sse_comment(text: str) -> str:
    """An SSE comment line: clients ignore it; it carries progress and keeps the connection open."""
    return f": {text}\n\n"


def _finish(reason: str) -> str:
    # OpenAI knows stop/length; cancellation and errors are reported as "stop".
    return "length" if reason == "length" else "stop"
