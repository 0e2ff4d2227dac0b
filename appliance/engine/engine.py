"""The engine: one background thread owns the llama.cpp context and runs `step()` forever.

Callers (API, UI, CLI) `submit()` and read their `Request`; they never touch the context.
Each step: schedule (admit, prefix-share, build batch) → decode → sample → stream → finish.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from pathlib import Path

from appliance.config import EngineSettings, Settings
from appliance.engine.draft import DraftModel
from appliance.engine.errors import EngineStopped, PromptTooLong
from appliance.engine.kvcache import KVCache
from appliance.engine.llama import ContextConfig, LlamaRunner
from appliance.engine.metrics import EngineMetrics
from appliance.engine.prompt import PromptTokenizer
from appliance.engine.request import DONE, Channel, Request
from appliance.engine.scheduler import Scheduler, SchedulerConfig
from appliance.engine.sequence import BatchItem, SamplingParams, Sequence, loop_period
from appliance.engine.speculative import SpecConfig, accepted_prefix, new_state
from appliance.models.metadata import ModelInfo

log = logging.getLogger("appliance.engine")


class Engine:
    """Continuous batching with a shared-prefix KV cache over one llama.cpp context."""

    def __init__(self, ctx: ContextConfig, knobs: EngineSettings,
                 info: ModelInfo | None = None, model_name: str = "", draft: ContextConfig | None = None) -> None:
        self.knobs = knobs
        self.info = info
        self.model_name = model_name or Path(ctx.model_path).stem
        self._ctx_config = ctx
        self.restarts: list[float] = []  # when the context was rebuilt after a failure
        self.runner = LlamaRunner(ctx)
        self.drafter: DraftModel | None = None
        try:
            # A draft model (speculative decoding's second proposer) checks its vocabulary first.
            self.drafter = DraftModel(draft, self.runner) if draft is not None else None
            self._setup(ctx, knobs, info)
        except BaseException:
            if self.drafter is not None:
                self.drafter.close()
            self.runner.close()
            raise
        self._thread = threading.Thread(target=self._loop, name="appliance-engine", daemon=True)
        self._thread.start()

    def _setup(self, ctx: ContextConfig, knobs: EngineSettings, info: ModelInfo | None) -> None:
        self._setup_runtime(ctx, knobs, info)
        self.metrics = EngineMetrics()
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._channels: dict[int, Channel] = {}
        self._stopping = False
        self.error: BaseException | None = None

    def _setup_runtime(self, ctx: ContextConfig, knobs: EngineSettings, info: ModelInfo | None) -> None:
        """What a context rebuild recreates: the KV ledger, the scheduler, the chat template."""
        r = self.runner
        bytes_per_token = info.kv_bytes_per_token(ctx.type_k, ctx.type_v) if info else 0
        self.cache = KVCache(r.n_ctx, r.n_seq_max, memory=r, bytes_per_token=bytes_per_token)
        self.scheduler = Scheduler(self.cache, SchedulerConfig(
            max_running=r.n_seq_max if knobs.continuous_batching else 1,
            n_batch=r.n_batch, prefill_chunk=knobs.prefill_chunk, gen_reserve=knobs.gen_reserve,
            max_queue=knobs.max_queue, per_user_queue=knobs.per_user_queue, background_slots=knobs.background_slots,
            spec=spec_config(knobs, self.drafter is not None), tpot_target_s=knobs.tpot_target_ms / 1000,
            # Recurrent and hybrid models keep one state per sequence, not per position: a prefix
            # cannot be shared or cut back, so they run without the prefix cache.
            prefix_cache=knobs.prefix_cache and not r.recurrent))
        if self.drafter is not None:
            self.drafter.reset()  # a rebuilt target context holds nothing the draft slots remember
            self.scheduler.draft_cost = self.drafter.cost
        if r.recurrent and knobs.prefix_cache:
            log.warning("%s is recurrent/hybrid: prefix cache off", self.model_name)
        self.prompts = PromptTokenizer(r)

    @classmethod
    def from_config(cls, settings: Settings) -> Engine:
        """Build the engine for the configured (or default registered) chat model."""
        from appliance.models.registry import ModelRegistry

        registry = ModelRegistry(settings.data_path)
        entry = registry.resolve(settings.chat_model)
        draft = None
        if settings.engine.draft_model and settings.engine.speculative:
            draft = context_config(settings, Path(registry.resolve(settings.engine.draft_model).path))
            draft.type_k = draft.type_v = "f16"
        return cls(context_config(settings, Path(entry.path)), settings.engine, entry.model_info, entry.name, draft)

    # -- public API ----------------------------------------------------------------------
    def tokenize_messages(self, messages: list[dict]) -> list[int]:
        """Render the chat template and tokenize (special tokens parsed)."""
        return self.prompts.tokenize_messages(messages)

    def submit(self, prompt: list[dict] | list[int], params: SamplingParams | None = None) -> Request:
        """Queue messages (OpenAI style) or prompt token ids. Raises EngineOverloaded,
        PromptTooLong, EngineStopped."""
        params = params or SamplingParams()
        if self._stopping or self.error is not None:
            raise EngineStopped(f"engine is not running{f': {self.error}' if self.error else ''}")
        tokens = list(prompt) if prompt and isinstance(prompt[0], int) else \
            self.tokenize_messages(prompt)  # type: ignore[arg-type]
        if not tokens:
            raise ValueError("empty prompt")
        if params.grammar and not self.runner.grammar_ok(params.grammar):
            raise ValueError("the grammar (or JSON schema) cannot be parsed by llama.cpp")
        if len(tokens) + 1 > self.runner.n_ctx:
            raise PromptTooLong(len(tokens), self.runner.n_ctx)
        max_tokens = min(params.max_tokens or self.knobs.default_max_tokens,
                         self.runner.n_ctx - len(tokens))
        seq = Sequence(prompt_tokens=tokens, params=params, max_tokens=max_tokens)
        seq.spec = new_state(params.speculative, max_tokens, self.scheduler.cfg.spec)
        channel = Channel()
        with self._wake:
            try:
                self.scheduler.add(seq)
            except Exception:
                self.metrics.on_rejected()
                raise
            self._channels[seq.id] = channel
            self._wake.notify()
        return Request(seq, channel)

    def gauges(self) -> dict:
        """Cheap live gauges: running and waiting requests, KV cells (polled by benchmarks)."""
        with self._lock:
            return {"running": len(self.scheduler.running), "waiting": len(self.scheduler.waiting),
                    **self.cache.snapshot()}

    def snapshot(self) -> dict:
        """Metrics plus live gauges (running, waiting, KV cells) for /metrics and the admin tab."""
        return {**self.metrics.snapshot(), **self.gauges(), "model": self.model_name,
                "healthy": self.error is None and self._thread.is_alive()}

    def wait_idle(self, timeout: float = 30.0) -> bool:
        """Block until nothing is waiting or running (tests, benchmarks)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                if not self.scheduler.has_work():
                    return True
            time.sleep(0.01)
        return False

    def shutdown(self) -> None:
        """Stop the thread, end outstanding requests, free llama.cpp resources."""
        with self._wake:
            self._stopping = True
            self._wake.notify()
        self._thread.join(timeout=30)
        with self._lock:
            for seq in [*self.scheduler.running, *self.scheduler.waiting]:
                self.scheduler.finish(seq, "cancelled")
            self._deliver_finished()
        if self.drafter is not None:
            self.drafter.close()
        self.runner.close()

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc) -> None:
        self.shutdown()

    # -- the engine thread ---------------------------------------------------------------
    def _loop(self) -> None:
        while True:
            try:
                while True:
                    with self._wake:
                        while not self._stopping and not self.scheduler.has_work():
                            self._wake.wait(timeout=0.5)
                        if self._stopping:
                            return
                    self.step()
            except BaseException as e:  # noqa: BLE001 - fail the requests in flight, never hang callers
                log.exception("engine step failed; the context is rebuilt")
                self.error = e  # /healthz says degraded until the rebuild is done
                self._fail_all(e)
                if not self._rebuild():
                    return

    def _fail_all(self, error: BaseException) -> None:
        with self._lock:
            for seq in [*self.scheduler.running, *self.scheduler.waiting]:
                self.scheduler.finish(seq, "error")
                self._send(seq, error)
                self._channels.pop(seq.id, None)
            self.scheduler.finished.clear()

    def _rebuild(self) -> bool:
        """A fresh llama.cpp context after a failure; at most 3 in 10 minutes (then the engine stops
        and new requests get EngineStopped: a context that keeps breaking needs an operator)."""
        now = time.monotonic()
        self.restarts = [t for t in self.restarts if now - t < 600] + [now]
        if len(self.restarts) > 3 or self._stopping:
            log.error("engine stopped: too many context failures")
            return False
        with self._lock:
            try:
                self.runner.close()
                self.runner = LlamaRunner(self._ctx_config)
                self._setup_runtime(self._ctx_config, self.knobs, self.info)
            except BaseException as e:  # noqa: BLE001 - cannot rebuild: stay stopped, say why
                log.exception("engine context rebuild failed")
                self.error = e
                return False
            self.error = None
        log.warning("engine context rebuilt (%d in the last 10 minutes)", len(self.restarts))
        return True

    def step(self) -> bool:
        """One scheduling round: returns False when there was nothing to run."""
        with self._lock:
            items = self.scheduler.schedule()
            self._deliver_finished()
        if not items:
            return False
        if self.drafter is not None and any(i.draft_k for i in items):
            self._fill_drafts(items)
        t0 = time.perf_counter()
        rc = self.runner.decode(items)
        elapsed = time.perf_counter() - t0
        with self._lock:
            if rc == 1:
                self.metrics.no_kv_slot += 1
                self.scheduler.no_kv_slot(items)
            else:
                self.scheduler.committed(items)
                n_tokens = sum(len(i.tokens) for i in items)
                self.scheduler.pacer.observe(n_tokens, elapsed)
                self.metrics.on_step(n_tokens, len({i.seq.id for i in items}))
                for item in items:
                    if item.logits and item.seq.slot is not None:
                        self._sample_or_fail(item)
            self._deliver_finished()
        return True

    def _fill_drafts(self, items: list[BatchItem]) -> None:
        """Ask the draft model for the drafts the scheduler reserved room for (outside the lock: only
        this thread touches the sequences' tokens and the draft context)."""
        wanted = [i for i in items if i.draft_k]
        drafts = self.drafter.propose([(i.slot, i.seq.all_tokens[:i.start + len(i.tokens)], i.draft_k)
                                       for i in wanted])
        for item in wanted:
            item.draft = drafts.get(item.slot, [])[:item.draft_k]
            item.tokens = item.tokens + item.draft
            item.draft_k = 0

    def _sample_or_fail(self, item: BatchItem) -> None:
        """One sequence's sampling failing (a sampler error, a broken token) ends that request only."""
        try:
            self._sample(item)
        except Exception as e:  # noqa: BLE001 - isolate the failure to its own request
            log.exception("request %d failed while sampling", item.seq.id)
            self._send(item.seq, e)
            self._channels.pop(item.seq.id, None)
            if not item.seq.is_finished:
                self.scheduler.finish(item.seq, "error")

    def _sample(self, item: BatchItem) -> None:
        seq, runner = item.seq, self.runner
        if not runner.has_sampler(seq.id):
            runner.new_sampler(seq.id, seq.params)
        if not item.draft:
            self._emit(seq, runner.sample(seq.id, item.row))
            return
        # Verify: the sampler picks at each row while its pick confirms the next draft token.
        picks: list[int] = []
        for row, expected in zip(item.rows, [*item.draft, None], strict=True):
            picks.append(runner.sample(seq.id, row))
            if picks[-1] != expected or runner.is_eog(picks[-1]):
                break
        accepted = accepted_prefix(item.draft, picks)
        self.scheduler.settle_draft(item, accepted)
        self.metrics.on_draft(self.scheduler.cfg.spec.proposer, len(item.draft), accepted)
        for token in picks:
            if self._emit(seq, token):
                break

    def _emit(self, seq: Sequence, token: int) -> bool:
        """Append one picked token, stream it, and finish the request when it ends there."""
        runner = self.runner
        self.scheduler.append_token(seq, token)
        if runner.is_eog(token) and not seq.params.ignore_eos:
            self._finish(seq, "stop")
            return True
        delta = seq.stream.feed(runner.piece(token))
        if delta and not self._send(seq, delta):
            seq.cancelled = True
        if seq.stream.stopped:
            self._finish(seq, "stop")
        elif seq.params.loop_guard and loop_period(seq.output_tokens):
            log.info(json.dumps({"event": "loop_stopped", "seq": seq.id, "tokens": len(seq.output_tokens),
                                 "period": loop_period(seq.output_tokens)}))
            self._finish(seq, "stop")
        elif len(seq.output_tokens) >= seq.max_tokens or seq.n_tokens >= runner.n_ctx:
            self._finish(seq, "length")
        return seq.is_finished

    def _finish(self, seq: Sequence, reason: str) -> None:
        tail = seq.stream.flush() if reason != "cancelled" else ""
        if tail:
            self._send(seq, tail)
        self.scheduler.finish(seq, reason)

    def _deliver_finished(self) -> None:
        for seq in self.scheduler.finished:
            self.runner.free_sampler(seq.id)
            self.metrics.on_finish(seq)
            self._send(seq, DONE)
            self._channels.pop(seq.id, None)
        self.scheduler.finished.clear()

    def _send(self, seq: Sequence, event: object) -> bool:
        channel = self._channels.get(seq.id)
        return channel.put(event) if channel is not None else False


def spec_config(knobs: EngineSettings, draft_model: bool = False) -> SpecConfig:
    """The speculation policy from the engine settings (and whether a draft model proposes)."""
    return SpecConfig(draft_tokens=knobs.speculative, min_output=knobs.spec_min_output,
                      min_accept=knobs.spec_min_accept, max_decoders=knobs.spec_max_decoders,
                      proposer="draft_model" if draft_model else "lookup")


def context_config(settings: Settings, model_path: Path) -> ContextConfig:
    """The llama.cpp context the engine settings ask for, over `model_path`."""
    e = settings.engine
    return ContextConfig(model_path=model_path, n_ctx=e.n_ctx, n_seq_max=e.n_seq_max, n_batch=e.n_batch,
                         n_ubatch=e.n_ubatch, n_threads=e.n_threads, n_gpu_layers=e.n_gpu_layers,
                         flash_attn=e.flash_attn, type_k=e.type_k, type_v=e.type_v)
