"""The only module that touches llama.cpp's C API (through llama-cpp-python's ctypes bindings).

It owns the model, the context, the batch and the per-sequence samplers. Every return code is
checked and turned into a typed exception; handles are freed by `close()` (also on garbage
collection) so error paths never repeat `free` calls by hand.
"""

from __future__ import annotations

import ctypes
import os
import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from appliance.engine.errors import DecodeError, EngineError
from appliance.engine.sequence import BatchItem, SamplingParams

# llama.cpp's default DRY sequence breakers: a repeat that crosses one of these is not penalised.
_DRY_BREAKER_TEXT = ("\n", ":", "\"", "*")
# Tokens DRY looks back over. Not -1 ("the context size"): this C API has no context-size argument,
# so -1 silently means a window of 0 and DRY does nothing (tests/test_repetition.py shows it).
_DRY_WINDOW = 1024
_DRY_BREAKERS = (ctypes.c_char_p * len(_DRY_BREAKER_TEXT))(*(b.encode() for b in _DRY_BREAKER_TEXT))

_INIT_LOCK = threading.Lock()
_BACKEND_READY = False
# llama.cpp keeps a raw pointer to the log callback: keep ours alive for the process lifetime.
_LOG_CALLBACK = None

_KV_TYPES = {"f16": 1, "q8_0": 8}
_FLASH_ATTN = {"auto": -1, "off": 0, "on": 1}


def _lib():
    import llama_cpp  # deferred: importing loads the shared library

    return llama_cpp


def init_backend(quiet: bool = True) -> None:
    """Initialise llama.cpp once per process and silence its logging unless asked not to."""
    global _BACKEND_READY, _LOG_CALLBACK
    with _INIT_LOCK:
        if _BACKEND_READY:
            return
        lib = _lib()
        if quiet and os.environ.get("APPLIANCE_LLAMA_LOG") != "1":
            _LOG_CALLBACK = lib.llama_log_callback(lambda level, text, data: None)
            lib.llama_log_set(_LOG_CALLBACK, ctypes.c_void_p())
        lib.llama_backend_init()
        _BACKEND_READY = True


def system_info() -> str:
    """llama.cpp's build features (`llama_print_system_info`)."""
    init_backend()
    return _lib().llama_print_system_info().decode("utf-8", errors="replace")


def supports_gpu_offload() -> bool:
    """Whether this llama.cpp build can offload layers to a GPU."""
    init_backend()
    return bool(_lib().llama_supports_gpu_offload())


def measure_buffers(cfg: ContextConfig) -> dict[str, int]:
    """Bytes llama.cpp reports allocating for KV and compute buffers with this config.

    llama.cpp only tells through its log, so the log is captured while a context is created.
    """
    import re

    init_backend()
    lib = _lib()
    lines: list[str] = []
    capture = lib.llama_log_callback(lambda level, text, data: lines.append(text.decode("utf-8", "replace")))
    lib.llama_log_set(capture, ctypes.c_void_p())
    try:
        with LlamaRunner(cfg):
            pass
    finally:
        global _LOG_CALLBACK
        if _LOG_CALLBACK is None:  # llama.cpp keeps the pointer: it must outlive this call
            _LOG_CALLBACK = lib.llama_log_callback(lambda level, text, data: None)
        lib.llama_log_set(_LOG_CALLBACK, ctypes.c_void_p())
    out = {"kv": 0, "compute": 0}
    for line in lines:
        m = re.search(r"(KV|compute) buffer size =\s*([\d.]+) MiB", line)
        if m:
            out["kv" if m.group(1) == "KV" else "compute"] += int(float(m.group(2)) * 2**20)
    return out


@dataclass
class ContextConfig:
    """Everything llama.cpp needs to create a model + context."""

    model_path: Path
    n_ctx: int = 4096
    n_seq_max: int = 16
    n_batch: int = 512
    n_ubatch: int = 512
    n_threads: int = 0
    n_gpu_layers: int = -1
    flash_attn: str = "auto"
    type_k: str = "f16"
    type_v: str = "f16"
    # Keep the full KV of sliding-window layers (None = yes for models that have them). Without it
    # llama.cpp reuses the cells of positions that left the window, and a cached prefix shared into a
    # new sequence misses them: wrong output, silently (Gemma 3: max KL 4.8 against a cold run).
    swa_full: bool | None = None
    # Tokenizer and template only (no weights, no context): the remote backend's prompt counting.
    vocab_only: bool = False
    # A ggml_backend_sched_eval_callback (ctypes) that sees tensors as they are computed: the
    # importance-matrix collector of `appliance quantize`. The caller keeps it alive.
    eval_callback: object | None = None


class LlamaRunner:
    """A loaded model with one context whose unified KV cache all sequences share."""

    def __init__(self, cfg: ContextConfig) -> None:
        init_backend()
        self.lib = lib = _lib()
        self.cfg = cfg
        self._model = self._ctx = self._batch = None
        self._samplers: dict[int, ctypes.c_void_p] = {}
        mparams = lib.llama_model_default_params()
        # -1 means "all": llama.cpp clamps to the layer count; CPU-only builds ignore it.
        mparams.n_gpu_layers = 999 if cfg.n_gpu_layers < 0 else cfg.n_gpu_layers
        mparams.vocab_only = cfg.vocab_only
        self._model = lib.llama_model_load_from_file(str(cfg.model_path).encode(), mparams)
        if not self._model:
            raise EngineError(f"llama.cpp could not load {cfg.model_path}")
        self._vocab = lib.llama_model_get_vocab(self._model)
        self.n_vocab = lib.llama_vocab_n_tokens(self._vocab)
        self._pieces: dict[int, bytes] = {}
        if not cfg.vocab_only:
            self._init_context()

    def _init_context(self) -> None:
        lib, cfg = self.lib, self.cfg
        try:
            self._ctx = lib.llama_init_from_model(self._model, self._context_params())
            if not self._ctx:
                raise EngineError("llama.cpp could not create a context "
                                  f"(n_ctx={cfg.n_ctx}, n_seq_max={cfg.n_seq_max}); lower them")
            self._mem = lib.llama_get_memory(self._ctx)
            self.n_ctx = lib.llama_n_ctx(self._ctx)
            self.n_batch = lib.llama_n_batch(self._ctx)
            self.n_seq_max = lib.llama_n_seq_max(self._ctx)
            self.n_swa = lib.llama_model_n_swa(self._model)
            self.recurrent = bool(lib.llama_model_is_recurrent(self._model) or lib.llama_model_is_hybrid(self._model))
            self._batch = lib.llama_batch_init(self.n_batch, 0, 1)
        except BaseException:
            self.close()
            raise

    def _context_params(self):
        lib, cfg = self.lib, self.cfg
        p = lib.llama_context_default_params()
        p.n_ctx = cfg.n_ctx
        p.n_batch = cfg.n_batch
        p.n_ubatch = min(cfg.n_ubatch, cfg.n_batch)
        p.n_seq_max = cfg.n_seq_max
        threads = cfg.n_threads or os.cpu_count() or 1
        p.n_threads = p.n_threads_batch = threads
        p.flash_attn_type = _FLASH_ATTN[cfg.flash_attn]
        p.type_k, p.type_v = _KV_TYPES[cfg.type_k], _KV_TYPES[cfg.type_v]
        # One pool of cells shared by all sequences: this is what makes seq_cp free and lets a
        # shared system prompt occupy its cells once.
        p.kv_unified = True
        p.swa_full = cfg.swa_full if cfg.swa_full is not None else lib.llama_model_n_swa(self._model) > 0
        p.no_perf = True
        if cfg.eval_callback is not None:
            p.cb_eval = cfg.eval_callback
        return p

    # -- lifecycle ---------------------------------------------------------------------
    def close(self) -> None:
        """Free samplers, batch, context and model. Safe to call twice."""
        lib = getattr(self, "lib", None)
        if lib is None:
            return
        for chain in self._samplers.values():
            lib.llama_sampler_free(chain)
        self._samplers.clear()
        if self._batch is not None:
            lib.llama_batch_free(self._batch)
            self._batch = None
        if self._ctx:
            lib.llama_free(self._ctx)
            self._ctx = None
        if self._model:
            lib.llama_model_free(self._model)
            self._model = None

    def __enter__(self) -> LlamaRunner:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown may have torn down ctypes
            pass

    # -- vocabulary --------------------------------------------------------------------
    def tokenize(self, text: str, add_special: bool = True, parse_special: bool = True) -> list[int]:
        """Text to token ids (special tokens in chat templates are parsed as such)."""
        raw = text.encode("utf-8")
        cap = len(raw) + 16
        buf = (ctypes.c_int32 * cap)()
        n = self.lib.llama_tokenize(self._vocab, raw, len(raw), buf, cap, add_special, parse_special)
        if n < 0:
            cap = -n
            buf = (ctypes.c_int32 * cap)()
            n = self.lib.llama_tokenize(self._vocab, raw, len(raw), buf, cap, add_special,
                                        parse_special)
        if n < 0:
            raise EngineError(f"tokenization failed ({n})")
        return list(buf[:n])

    def piece(self, token: int) -> bytes:
        """The bytes of one token (may be part of a UTF-8 character); cached per token."""
        out = self._pieces.get(token)
        if out is None:
            buf = ctypes.create_string_buffer(64)
            n = self.lib.llama_token_to_piece(self._vocab, token, buf, 64, 0, False)
            if n < 0:
                buf = ctypes.create_string_buffer(-n)
                n = self.lib.llama_token_to_piece(self._vocab, token, buf, -n, 0, False)
            out = self._pieces[token] = buf.raw[:max(n, 0)]
        return out

    def token_text(self, token: int) -> str:
        """The vocabulary text of a token (special tokens included), for templates."""
        raw = self.lib.llama_vocab_get_text(self._vocab, token)
        return raw.decode("utf-8", errors="replace") if raw else ""

    @property
    def vocab(self):
        """The llama_vocab handle (for vocabulary comparisons, e.g. a draft model's)."""
        return self._vocab

    def is_eog(self, token: int) -> bool:
        return bool(self.lib.llama_vocab_is_eog(self._vocab, token))

    def special_tokens(self) -> dict[str, int]:
        """BOS/EOS/EOT ids (-1 when the model has none)."""
        lib, v = self.lib, self._vocab
        return {"bos": lib.llama_vocab_bos(v), "eos": lib.llama_vocab_eos(v),
                "eot": lib.llama_vocab_eot(v)}

    def chat_template(self) -> str | None:
        raw = self.lib.llama_model_chat_template(self._model, None)
        return raw.decode("utf-8", errors="replace") if raw else None

    # -- memory (the calls the KV ledger mirrors) ---------------------------------------
    def seq_cp(self, src: int, dst: int, p0: int, p1: int) -> None:
        self.lib.llama_memory_seq_cp(self._mem, src, dst, p0, p1)

    def seq_rm(self, seq: int, p0: int, p1: int) -> None:
        if not self.lib.llama_memory_seq_rm(self._mem, seq, p0, p1):
            raise EngineError(f"llama_memory_seq_rm({seq}, {p0}, {p1}) refused")

    def seq_pos_range(self, seq: int) -> tuple[int, int]:
        """(min, max) position llama.cpp holds for `seq`; (-1, -1) when empty."""
        return (self.lib.llama_memory_seq_pos_min(self._mem, seq),
                self.lib.llama_memory_seq_pos_max(self._mem, seq))

    def clear_memory(self) -> None:
        self.lib.llama_memory_clear(self._mem, True)

    # -- decoding ----------------------------------------------------------------------
    def decode(self, items: list[BatchItem]) -> int:
        """Decode one batch. Returns 0, or 1 when llama.cpp found no KV slot (recoverable).

        Raises DecodeError on anything else. Sets `item.row` for items that want logits.
        """
        batch, row = self._batch, 0
        for item in items:
            # the last token, then every draft row (or every row, when asked)
            first_out = 0 if item.every_row else len(item.tokens) - 1 - len(item.draft)
            item.rows = []
            for j, tok in enumerate(item.tokens):
                if row >= self.n_batch:
                    raise DecodeError(f"batch of more than n_batch={self.n_batch} tokens")
                batch.token[row] = tok
                batch.pos[row] = item.start + j
                batch.n_seq_id[row] = 1
                batch.seq_id[row][0] = item.slot
                want = item.logits and j >= first_out
                batch.logits[row] = want
                if want:
                    item.row = row
                    item.rows.append(row)
                row += 1
        batch.n_tokens = row
        rc = self.lib.llama_decode(self._ctx, batch)
        if rc not in (0, 1):
            raise DecodeError(f"llama_decode failed with code {rc}")
        return rc

    def logits(self, row: int) -> np.ndarray:
        """A copy of the logits of batch row `row` from the last decode."""
        ptr = self.lib.llama_get_logits_ith(self._ctx, row)
        if not ptr:
            raise DecodeError(f"no logits for batch row {row}")
        return np.ctypeslib.as_array(ptr, shape=(self.n_vocab,)).copy()

    def output_logits(self, n: int) -> np.ndarray:
        """A copy of the first `n` output rows' logits of the last decode, as an (n, n_vocab) array."""
        ptr = self.lib.llama_get_logits(self._ctx)
        if not ptr:
            raise DecodeError("no logits from the last decode")
        return np.ctypeslib.as_array(ptr, shape=(n, self.n_vocab)).copy()

    # -- sampling ----------------------------------------------------------------------
    def new_sampler(self, key: int, p: SamplingParams) -> None:
        """Create the sampler chain of sequence `key` from its sampling parameters."""
        self.free_sampler(key)
        lib = self.lib
        chain = lib.llama_sampler_chain_init(lib.llama_sampler_chain_default_params())
        if not chain:
            raise EngineError("could not create a sampler chain")
        if p.grammar:  # first: every later sampler then only sees tokens the grammar allows
            grammar = lib.llama_sampler_init_grammar(self._vocab, p.grammar.encode(), b"root")
            if not grammar:
                lib.llama_sampler_free(chain)
                raise EngineError("the grammar does not parse")
            lib.llama_sampler_chain_add(chain, grammar)
        # Why top-k first: the penalty samplers over the full vocabulary are slow.
        if p.temperature > 0 and p.top_k > 0:
            lib.llama_sampler_chain_add(chain, lib.llama_sampler_init_top_k(p.top_k))
        if p.repeat_penalty != 1.0 or p.frequency_penalty or p.presence_penalty:
            lib.llama_sampler_chain_add(chain, lib.llama_sampler_init_penalties(
                self.n_vocab, p.penalty_last_n, p.repeat_penalty, p.frequency_penalty, p.presence_penalty))
        if p.dry_multiplier > 0:
            lib.llama_sampler_chain_add(chain, lib.llama_sampler_init_dry(
                self._vocab, p.dry_multiplier, p.dry_base, p.dry_allowed_length, _DRY_WINDOW,
                _DRY_BREAKERS, len(_DRY_BREAKER_TEXT)))
        if p.temperature <= 0:
            lib.llama_sampler_chain_add(chain, lib.llama_sampler_init_greedy())
        else:
            lib.llama_sampler_chain_add(chain, lib.llama_sampler_init_top_p(p.top_p, 1))
            lib.llama_sampler_chain_add(chain, lib.llama_sampler_init_min_p(p.min_p, 1))
            lib.llama_sampler_chain_add(chain, lib.llama_sampler_init_temp(p.temperature))
            lib.llama_sampler_chain_add(chain, lib.llama_sampler_init_dist(
                lib.LLAMA_DEFAULT_SEED if p.seed is None else p.seed & 0xFFFFFFFF))
        self._samplers[key] = chain

    def grammar_ok(self, grammar: str) -> bool:
        """Whether llama.cpp parses `grammar` (GBNF, start rule `root`)."""
        sampler = self.lib.llama_sampler_init_grammar(self._vocab, grammar.encode(), b"root")
        if not sampler:
            return False
        self.lib.llama_sampler_free(sampler)
        return True

    def sample(self, key: int, row: int) -> int:
        """Sample (and accept) the next token of sequence `key` from batch row `row`."""
        return int(self.lib.llama_sampler_sample(self._samplers[key], self._ctx, row))

    def has_sampler(self, key: int) -> bool:
        return key in self._samplers

    def free_sampler(self, key: int) -> None:
        chain = self._samplers.pop(key, None)
        if chain is not None:
            self.lib.llama_sampler_free(chain)
