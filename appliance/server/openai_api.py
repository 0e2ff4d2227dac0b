"""OpenAI-compatible routes: /v1/chat/completions, /v1/models, /v1/embeddings. Thin: they parse,
call the chat service, and format with `wire`."""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from contextlib import contextmanager

from fastapi import APIRouter, Depends
from fastapi.responses import JSONResponse, StreamingResponse

from appliance.engine.chat_template import ChatTemplateError
from appliance.engine.errors import BackendError, EngineError, EngineOverloaded, EngineStopped, PromptTooLong
from appliance.engine.remote import FRONT_MODELS
from appliance.errors import ApplianceError
from appliance.server import wire
from appliance.server.auth import User
from appliance.server.chat import Prepared, rag_sampling
from appliance.server.deps import current_user, services
from appliance.server.longdoc import DocumentError, find_document
from appliance.server.services import Services
from knowledge.answer import grounding
from knowledge.index.access import Scope

RAG_MODEL, SUMMARIZE_MODEL = FRONT_MODELS  # RAG; the whole `document` summarised (server.longdoc)
router = APIRouter(prefix="/v1")
root_router = APIRouter()  # vLLM-compatible extras outside /v1
log = logging.getLogger("appliance.requests")


def _log_result(cid: str, user: str, model: str, result) -> None:
    """One structured line per generation: ids, timings, tokens (never the text)."""
    s = result.stats
    log.info(json.dumps({"id": cid, "user": user, "model": model, "finish": result.finish_reason,
                         "prompt_tokens": s.prompt_tokens, "cached_tokens": s.cached_prompt_tokens,
                         "completion_tokens": s.generated_tokens, "queue_ms": round(s.queue_time * 1000, 1),
                         "ttft_ms": round((s.ttft or 0) * 1000, 1), "tpot_ms": round((s.tpot or 0) * 1000, 1)}))


def model_names(svc: Services) -> list[str]:
    """The models this server answers to: RAG, whole-document, and the engine's own model."""
    return [RAG_MODEL, SUMMARIZE_MODEL, svc.engine.model_name]


@router.get("/models")
def list_models(user: User = Depends(current_user), svc: Services = Depends(services)) -> dict:
    now = int(time.time())
    names = model_names(svc)
    return {"object": "list", "data": [{"id": n, "object": "model", "created": now, "owned_by": "appliance"}
                                       for n in names]}


@root_router.post("/tokenize")
async def tokenize(body: wire.TokenizeRequest, user: User = Depends(current_user),
                   svc: Services = Depends(services)) -> dict:
    """vLLM's tokenizer endpoint, so another appliance (or any client) can budget prompts for this model."""
    if body.model and body.model not in (RAG_MODEL, svc.engine.model_name):
        raise wire.ApiError(404, f"model {body.model!r} does not exist; see /v1/models", "model_not_found")
    if not body.messages:
        raise wire.ApiError(400, "messages is required (this server counts chat prompts only)", "invalid_request")
    try:
        tokens = await asyncio.to_thread(svc.engine.tokenize_messages, wire.plain_messages(body.messages))
    except ChatTemplateError as e:
        raise wire.ApiError(400, str(e), "invalid_request") from None
    return {"count": len(tokens), "tokens": tokens}


@router.post("/embeddings")
def embeddings(body: wire.EmbeddingRequest, user: User = Depends(current_user),
               svc: Services = Depends(services)) -> dict:
    texts = [body.input] if isinstance(body.input, str) else list(body.input)
    if not texts or len(texts) > 2048:
        raise wire.ApiError(400, "input must hold 1 to 2048 strings", "invalid_input")
    vectors = svc.kb.embedder.encode(texts)
    n_tokens = sum(svc.kb.embedder.count_tokens_batch(texts))
    return {"object": "list", "model": body.model or svc.kb.embedder.name,
            "data": [{"object": "embedding", "index": i, "embedding": v.tolist()} for i, v in enumerate(vectors)],
            "usage": {"prompt_tokens": n_tokens, "total_tokens": n_tokens}}


@router.post("/chat/completions")
async def chat_completions(body: wire.ChatRequest, user: User = Depends(current_user),
                           svc: Services = Depends(services)):
    if body.model not in (RAG_MODEL, SUMMARIZE_MODEL, svc.engine.model_name):
        raise wire.ApiError(404, f"model {body.model!r} does not exist; see /v1/models", "model_not_found")
    if body.model == SUMMARIZE_MODEL or body.document is not None:
        return await document_completion(body, user, svc)
    with api_errors():
        params = body.params(user.name)
        if body.model == RAG_MODEL:  # the RAG model's own anti-repetition defaults (README: The API)
            params = rag_sampling(params)
        scope = svc.access.scope_for(user)  # per request: a revoked grant counts from the next question
        prepared = await asyncio.to_thread(lambda: svc.chat.prepare(body.plain_messages(), body.model == RAG_MODEL,
                                                                    scope=scope, style=body.answer_style))
        # In a thread: a remote backend waits here for its cluster to accept the request.
        req = await asyncio.to_thread(svc.chat.submit, prepared, params)
    citations = prepared.citations if body.model == RAG_MODEL else None
    return await respond(body, user, svc, req, prepared, citations)


@contextmanager
def api_errors():
    """Engine and request errors as OpenAI-style HTTP errors (503 with Retry-After when busy)."""
    try:
        yield
    except EngineOverloaded as e:
        raise wire.ApiError(503, str(e), "server_busy", "server_error",
                            headers={"Retry-After": str(int(e.retry_after + 0.999))}) from None
    except PromptTooLong as e:
        raise wire.ApiError(400, str(e), "context_length_exceeded") from None
    except ChatTemplateError as e:  # a role or content the model's chat template cannot take
        raise wire.ApiError(400, str(e), "invalid_request") from None
    except EngineStopped as e:  # also an unreachable remote cluster (BackendUnavailable)
        raise wire.ApiError(503, str(e), "engine_stopped", "server_error", headers={"Retry-After": "30"}) from None
    except BackendError as e:
        raise wire.ApiError(502, str(e), "upstream_error", "server_error") from None
    except ValueError as e:
        raise wire.ApiError(400, str(e), "invalid_request") from None


async def respond(body: wire.ChatRequest, user: User, svc: Services, req, prepared: Prepared,
                  citations: list | None):
    """The completion, or its SSE stream."""
    cid = wire.new_id()
    if body.stream:
        include_usage = bool(body.stream_options and body.stream_options.include_usage)
        return StreamingResponse(_stream(cid, body.model, svc, req, prepared, citations, include_usage, user.name),
                                 media_type="text/event-stream", headers={"Cache-Control": "no-cache"})
    if req is None:
        text = prepared.answer(None)
        use = wire.usage(None, returned_tokens=await _returned_tokens(svc, text))
        return JSONResponse(wire.completion(cid, body.model, text, "stop", use, citations,
                                            await _quote_extras(svc, prepared, text, citations)))
    try:
        result = await req.aresult()
    finally:
        req.cancel()  # the client went away before the end: free the KV
    _log_result(cid, user.name, body.model, result)
    text = prepared.answer(result.text)
    use = wire.usage(result.stats, returned_tokens=await _returned_tokens(svc, text, result))
    return JSONResponse(wire.completion(cid, body.model, text, result.finish_reason, use,
                                        citations, await _extras(svc, prepared, text, citations)))


NO_MODEL_RAN = ("no model ran: the answer quotes the documents, so prompt_tokens is 0; completion_tokens counts "
                "the quoted text in the model's vocabulary")


async def _quote_extras(svc: Services, prepared: Prepared, text: str, citations: list | None) -> dict:
    """A quoted answer's extension fields: the RAG ones, and why its usage shows no prompt."""
    return {**(await _extras(svc, prepared, text, citations) or {}), "usage_note": NO_MODEL_RAN}


async def _returned_tokens(svc: Services, text: str, result=None) -> int:
    """Tokens of the text returned, in the model's vocabulary: the model's own count when it wrote all
    of it, else the text as an assistant turn less the template's tokens around it."""
    if result is not None and text == result.text:
        return result.stats.generated_tokens

    def count() -> int:
        turn = len(svc.engine.tokenize_messages([{"role": "assistant", "content": text}]))
        return max(0, turn - len(svc.engine.tokenize_messages([{"role": "assistant", "content": ""}])))

    return await asyncio.to_thread(count)


async def _extras(svc: Services, prepared: Prepared, text: str, citations: list | None) -> dict | None:
    """The RAG answer's extension fields: which style answered, how well the documents cover the
    question (full, partial: passages under a warning, none: declined), and the grounding check."""
    if citations is None:
        return None
    extra: dict = {"answer_style": prepared.answered_by, "coverage": prepared.coverage}
    checked = await asyncio.to_thread(svc.chat.ground, prepared, text)
    if checked:
        extra["grounding"] = grounding.summary(checked)
    return extra


async def document_completion(body: wire.ChatRequest, user: User, svc: Services):
    """An answer over one whole indexed document (map-reduce): a summary, or the last user message
    answered. Streaming sends progress as SSE comments (`: map 3/12`) while the sections are read;
    a client that goes away cancels the map calls in flight."""
    if not body.document:
        raise wire.ApiError(400, f"{SUMMARIZE_MODEL} needs `document` (an indexed source; OpenAI SDK: extra_body)",
                            "invalid_request")
    if body.model not in (RAG_MODEL, SUMMARIZE_MODEL):
        raise wire.ApiError(400, f"`document` works with {RAG_MODEL} and {SUMMARIZE_MODEL}", "invalid_request")
    scope = svc.access.scope_for(user)
    try:  # indexed documents the caller may read only: the API never reads a path on the server's disk
        chunks = await asyncio.to_thread(lambda: find_document(svc.kb.db, svc.kb.cfg.name, body.document, False,
                                                               scope=scope))
    except DocumentError as e:
        raise wire.ApiError(404, str(e), "document_not_found") from None
    question = None if body.model == SUMMARIZE_MODEL else str(body.plain_messages()[-1]["content"])
    with api_errors():
        params = rag_sampling(body.params(user.name))
        sections = await asyncio.to_thread(svc.longdoc.split, chunks)
    stop = threading.Event()
    if body.stream:
        return StreamingResponse(_document_stream(body, user, svc, sections, question, params, stop, scope),
                                 media_type="text/event-stream", headers={"Cache-Control": "no-cache"})
    try:
        with api_errors():
            prepared = await asyncio.to_thread(lambda: svc.longdoc.prepare(sections, question, None, stop,
                                                                           scope=scope))
            req = await asyncio.to_thread(svc.chat.submit, prepared, params)
    finally:
        stop.set()  # a client gone mid-map cancels this coroutine: the calls in flight stop too
    return await respond(body, user, svc, req, prepared, prepared.citations)


async def _document_stream(body: wire.ChatRequest, user: User, svc: Services, sections: list, question: str | None,
                           params, stop: threading.Event, scope: Scope):
    loop, updates = asyncio.get_running_loop(), asyncio.Queue()

    def progress(stage: str, done: int, total: int) -> None:
        loop.call_soon_threadsafe(updates.put_nowait, f"{stage} {done}/{total}")

    work = asyncio.ensure_future(asyncio.to_thread(
        lambda: svc.longdoc.prepare(sections, question, progress, stop, scope=scope)))
    try:
        yield wire.sse_comment(f"sections {len(sections)}")
        while not work.done():
            update = asyncio.ensure_future(updates.get())
            await asyncio.wait({work, update}, return_when=asyncio.FIRST_COMPLETED)
            if update.done():
                yield wire.sse_comment(update.result())
            else:
                update.cancel()
        prepared = work.result()
        req = await asyncio.to_thread(svc.chat.submit, prepared, params)
    except (ApplianceError, ValueError) as e:  # the headers are gone: an error event, as in _stream
        yield wire.sse(wire.error_body(str(e), "engine_error", "server_error"))
        return
    finally:
        stop.set()  # the client went away (or it failed): the map calls in flight stop
    cid = wire.new_id()
    include_usage = bool(body.stream_options and body.stream_options.include_usage)
    async for line in _stream(cid, body.model, svc, req, prepared, prepared.citations, include_usage, user.name):
        yield line


async def _stream(cid: str, model: str, svc: Services, req, prepared: Prepared, citations: list | None,
                  include_usage: bool, user: str):
    """The SSE stream: citations on the first chunk, the style and grounding check on the last."""
    extra = {"citations": citations} if citations is not None else None
    yield wire.chunk(cid, model, {"role": "assistant", "content": ""}, extra=extra)
    if req is None:
        text = prepared.answer(None)
        yield wire.chunk(cid, model, {"content": text})
        yield wire.chunk(cid, model, {}, finish="stop", extra=await _quote_extras(svc, prepared, text, citations))
        if include_usage:
            yield wire.usage_chunk(cid, model, wire.usage(None, returned_tokens=await _returned_tokens(svc, text)))
        yield wire.sse("[DONE]")
        return
    try:
        text = ""
        async for delta in req:
            text += delta
            yield wire.chunk(cid, model, {"content": delta})
        if prepared.suffix:
            text += prepared.suffix
            yield wire.chunk(cid, model, {"content": prepared.suffix})
        result = req.result()
        _log_result(cid, user, model, result)
        yield wire.chunk(cid, model, {}, finish=result.finish_reason,
                         extra=await _extras(svc, prepared, text, citations))
        if include_usage:
            use = wire.usage(result.stats, returned_tokens=await _returned_tokens(svc, text, result))
            yield wire.usage_chunk(cid, model, use)
        yield wire.sse("[DONE]")
    except EngineError as e:
        # The headers are gone: an error event (the OpenAI SDK raises it) instead of a cut connection.
        log.warning("stream %s failed: %s", cid, e)
        yield wire.sse(wire.error_body(str(e), "upstream_error" if isinstance(e, BackendError) else "engine_error",
                                       "server_error"))
    finally:
        req.cancel()  # client disconnect: Starlette stops this generator; free the sequence's KV
