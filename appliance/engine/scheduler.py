"""Continuous-batching policy: admit, prefix match, chunked prefill, decode, finish, preempt.

Pure Python: it decides what runs each step and keeps the KV ledger (`KVCache`) in step with
llama.cpp through the ledger's `memory` object. The engine calls, each step:

    items = scheduler.schedule()          # admit + build the batch (fits the ledger)
    rc = runner.decode(items)
    scheduler.committed(items) | scheduler.no_kv_slot(items)
    ... sample, then scheduler.append_token / finish

so a fake runner is enough to test the policy.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from appliance.engine.errors import EngineOverloaded
from appliance.engine.kvcache import KVCache
from appliance.engine.pacing import StepPacer
from appliance.engine.sequence import BatchItem, Sequence, Status
from appliance.engine.speculative import SpecConfig, draft_for, draft_length


@dataclass
class SchedulerConfig:
    """Policy knobs (see EngineSettings for their descriptions)."""

    max_running: int = 16
    n_batch: int = 512
    prefill_chunk: int = 256
    gen_reserve: int = 256
    max_queue: int = 64
    per_user_queue: int = 16
    prefix_cache: bool = True
    background_slots: int = 0  # most running background (priority 1) sequences; 0 = half of max_running
    spec: SpecConfig = field(default_factory=SpecConfig)
    tpot_target_s: float = 0.0  # per-step token budget that keeps decoders at this pace; 0 = off


def background_cap(background_slots: int, max_running: int) -> int:
    """Most background (priority 1) sequences running at once: the setting, or half the slots."""
    return background_slots or max(1, max_running // 2)


_MIN_SHARED_WAIT = 32  # tokens: a shorter common prefix is not worth a delay


def _common_prefix_len(a: list[int], b: list[int]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


class Scheduler:
    """Owns the waiting queue, the running set and the KV ledger."""

    def __init__(self, cache: KVCache, cfg: SchedulerConfig) -> None:
        self.cache = cache
        self.cfg = cfg
        self.waiting: deque[Sequence] = deque()
        self.running: list[Sequence] = []
        self.finished: list[Sequence] = []  # drained by the engine after each step
        self._admitted = 0
        self._budget: int | None = None  # a smaller batch after llama.cpp found no KV slot
        self.pacer = StepPacer(cfg.tpot_target_s)
        self._hold_admission = False
        self._avg_request_s = 2.0
        self.prefix_queries = 0
        self.prefix_hit_tokens = 0
        self.prefix_query_tokens = 0
        # What a k-token draft costs to make (a draft model's measured time; prompt lookup: free).
        self.draft_cost: Callable[[int], float] = lambda k: 0.0

    # -- queue ---------------------------------------------------------------------------
    def add(self, seq: Sequence) -> None:
        """Queue a request, or raise EngineOverloaded when the queue or the user's share is full."""
        if len(self.waiting) >= self.cfg.max_queue:
            raise EngineOverloaded(f"server busy: {len(self.waiting)} requests waiting",
                                   self.retry_after())
        mine = sum(1 for s in self.waiting if s.params.user == seq.params.user)
        if mine >= self.cfg.per_user_queue:
            raise EngineOverloaded(f"too many waiting requests for user {seq.params.user!r}",
                                   self.retry_after())
        self.waiting.append(seq)

    def retry_after(self) -> float:
        """Seconds until the queue has likely drained by one batch of requests."""
        rounds = (len(self.waiting) + 1) / max(1, self.cfg.max_running)
        return max(1.0, round(rounds * self._avg_request_s, 1))

    def has_work(self) -> bool:
        return bool(self.waiting or self.running)

    # -- one step ------------------------------------------------------------------------
    def schedule(self) -> list[BatchItem]:
        """Reap cancelled sequences, admit what fits, and return this step's batch."""
        self._reap_cancelled()
        self._admit()
        drafts = True
        while True:
            items = self._build_batch(drafts)
            need = sum(len(i.tokens) + i.draft_k for i in items)
            if need <= self.cache.free_cells:
                return items
            if drafts and any(i.draft or i.draft_k for i in items):
                drafts = False  # draft tokens give way before any cached prefix or running request
                continue
            # Cached prefixes go first; then the youngest running sequence is preempted.
            if not self.cache.evict_one() and not self._preempt_youngest():
                return self._shrink_to_fit(items)

    def committed(self, items: list[BatchItem]) -> None:
        """The decode succeeded: record the new cells in the ledger."""
        self._budget = None
        for item in items:
            self.cache.append(item.slot, item.tokens)
            item.seq.n_computed += len(item.tokens)

    def settle_draft(self, item: BatchItem, accepted: int) -> None:
        """After verifying `item`'s draft: keep the cells of its first `accepted` draft tokens,
        remove the rest from llama.cpp and the ledger, and count the step for the policy."""
        seq = item.seq
        keep = item.start + 1 + accepted
        self.cache.truncate(item.slot, keep)
        seq.n_computed = keep
        seq.spec.record(len(item.draft), accepted, self.cfg.spec)

    def no_kv_slot(self, items: list[BatchItem]) -> None:
        """llama_decode returned 1: make room (evict all cached, else preempt) before a retry."""
        for item in items:  # llama.cpp restores its memory; make sure, and keep the ledger true
            self.cache.truncate(item.slot, item.seq.n_computed)
        # llama.cpp has less room than the ledger thought: admit nothing new until a running
        # sequence finishes, or a preempted one would be readmitted into the same failure.
        self._hold_admission = True
        if self.cache.cached_slots():
            while self.cache.evict_one():
                pass
        elif self._preempt_youngest():
            pass
        elif sum(len(i.tokens) for i in items) > 1:
            # One sequence left: retry with smaller prefill chunks.
            self._budget = max(1, sum(len(i.tokens) for i in items) // 2)
        else:
            # Not even one token fits: this sequence has all the memory llama.cpp will give.
            for item in items:
                self.finish(item.seq, "length")

    def append_token(self, seq: Sequence, token: int) -> None:
        now = time.perf_counter()
        seq.output_tokens.append(token)
        if seq.t_first is None:
            seq.t_first = now
        seq.t_last = now

    def finish(self, seq: Sequence, reason: str) -> None:
        """End a sequence; keep its KV as a cached prefix when allowed and not cancelled."""
        if seq in self.running:
            self.running.remove(seq)
        elif seq in self.waiting:
            self.waiting.remove(seq)
        if seq.slot is not None:
            if self.cfg.prefix_cache and reason != "cancelled" and seq.n_computed > 0:
                self.cache.park(seq.slot)
            else:
                self.cache.release(seq.slot)
            seq.slot = None
        seq.status = Status.FINISHED
        seq.finish_reason = reason
        self._hold_admission = False
        duration = time.perf_counter() - seq.t_submit
        self._avg_request_s = 0.8 * self._avg_request_s + 0.2 * duration
        self.finished.append(seq)

    # -- internals -----------------------------------------------------------------------
    def _reap_cancelled(self) -> None:
        for seq in [s for s in (*self.running, *self.waiting) if s.cancelled]:
            self.finish(seq, "cancelled")

    def _admit(self) -> None:
        if self._hold_admission and self.running:
            return
        # Interactive requests first (FIFO within a class); background ones only on their own slots,
        # so a batch job never holds every slot when a user asks.
        background = sum(1 for s in self.running if s.params.priority)
        cap = background_cap(self.cfg.background_slots, self.cfg.max_running)
        for seq in sorted(self.waiting, key=lambda s: s.params.priority):
            if len(self.running) >= self.cfg.max_running:
                break
            if seq.params.priority and background >= cap:
                break
            if self.cfg.prefix_cache and self._prefix_in_flight(seq):
                continue  # keeps its place; admitted once the shared prefix is computed
            if not self._try_admit(seq):
                break  # FIFO for memory: nobody overtakes a request that does not fit yet
            self.waiting.remove(seq)
            background += seq.params.priority

    def _prefix_in_flight(self, seq: Sequence) -> bool:
        """Whether a running sequence is still computing a prefix this one could share.

        Why: when 16 requests with the same system prompt arrive together, admitting them all at
        once would prefill that prompt 16 times; waiting a step or two lets them share one copy.
        """
        tokens = seq.all_tokens
        _, cached = self.cache.match(tokens)
        for other in self.running:
            if other.n_computed >= len(other.prompt_tokens):
                continue
            shared = _common_prefix_len(tokens, other.all_tokens)
            if shared - cached >= _MIN_SHARED_WAIT and other.n_computed < shared:
                return True
        return False

    def _try_admit(self, seq: Sequence) -> bool:
        tokens = seq.all_tokens
        src, n_match = (None, 0)
        if self.cfg.prefix_cache:
            src, n_match = self.cache.match(tokens)
            n_match = min(n_match, len(tokens) - 1)  # the last token must run to give logits
        need = len(tokens) - n_match + self._reserve_left(seq)
        # Cells the running sequences will still take (their prompt rest and reserve).
        promised = sum(s.n_pending + self._reserve_left(s) for s in self.running)
        # Evict cold prefixes until this request fits (never the one it is about to share).
        while self.cache.free_cells - promised < need or self.cache.free_slots() == 0:
            if not self.cache.evict_one(keep=src):
                break
        fits = self.cache.free_cells - promised >= need or (
            not self.running and self.cache.free_cells >= len(tokens) - n_match)
        if not fits:
            return False
        if self.cache.free_slots() == 0:
            if src is None or not self.cache.is_cached(src):
                return False
            # The only slot to be had holds our own prefix: take it over instead of copying.
            slot = self.cache.take_over(src, n_match)
        else:
            slot = self.cache.allocate()
            if n_match > 0 and src is not None:
                self.cache.share(src, slot, n_match)
        self._record_prefix(seq, n_match)
        seq.slot, seq.n_computed = slot, n_match
        seq.status = Status.RUNNING
        seq.t_admit = seq.t_admit or time.perf_counter()
        self._admitted += 1
        seq.admit_order = self._admitted
        self.running.append(seq)
        return True

    def _reserve_left(self, seq: Sequence) -> int:
        return max(0, min(self.cfg.gen_reserve, seq.max_tokens) - len(seq.output_tokens))

    def _record_prefix(self, seq: Sequence, n_match: int) -> None:
        if seq.preemptions:  # a resumed sequence's own tokens are not a prefix-cache hit
            return
        seq.n_cached_prompt = min(n_match, len(seq.prompt_tokens))
        self.prefix_queries += 1
        self.prefix_query_tokens += len(seq.prompt_tokens)
        self.prefix_hit_tokens += seq.n_cached_prompt

    def _build_batch(self, drafts: bool = True) -> list[BatchItem]:
        decoders = [s for s in self.running if s.n_pending == 1]
        budget = self._budget or self.pacer.budget(len(decoders), self.cfg.n_batch)
        items: list[BatchItem] = []
        # Decoding sequences first: one token each (plus a draft), so a long prefill never stalls them.
        for seq in decoders:
            if budget > 0:
                item = self._item(seq, 1)
                if drafts:
                    self._add_draft(item, budget - 1, len(decoders))
                items.append(item)
                budget -= len(item.tokens) + item.draft_k  # a draft model fills draft_k after this
        for seq in sorted(self.running, key=lambda s: s.params.priority):  # interactive prefill first
            if seq.n_pending > 1 and budget > 0:
                n = min(seq.n_pending, self.cfg.prefill_chunk, budget)
                items.append(self._item(seq, n))
                budget -= n
        return items

    def _add_draft(self, item: BatchItem, budget: int, decoders: int) -> None:
        seq = item.seq
        room = min(budget, seq.max_tokens - len(seq.output_tokens) - 1, self.cache.n_cells - seq.n_tokens - 1)
        if self.cfg.spec.proposer == "draft_model":  # the engine fills it, outside the lock
            item.draft_k = draft_length(seq.spec, room, decoders, self.pacer.step_time, self.cfg.spec, self.draft_cost)
            return
        item.draft = draft_for(seq.spec, seq.all_tokens, room, decoders, self.pacer.step_time, self.cfg.spec)
        item.tokens = item.tokens + item.draft

    @staticmethod
    def _item(seq: Sequence, n: int) -> BatchItem:
        start = seq.n_computed
        tokens = seq.all_tokens[start:start + n]
        return BatchItem(slot=seq.slot, tokens=tokens, start=start,
                         logits=start + n == seq.n_tokens, seq=seq)

    def _preempt_youngest(self) -> bool:
        """Requeue the most recently admitted running sequence, background ones first (keeping its tokens)."""
        if len(self.running) <= 1:
            return False
        seq = max(self.running, key=lambda s: (s.params.priority, s.admit_order))  # background first
        self.running.remove(seq)
        self.cache.release(seq.slot)
        seq.slot, seq.n_computed = None, 0
        seq.status = Status.WAITING
        seq.preemptions += 1
        self.waiting.appendleft(seq)
        return True

    def _shrink_to_fit(self, items: list[BatchItem]) -> list[BatchItem]:
        # One sequence alone and still no room: it has filled the whole context.
        for item in items:
            if len(item.tokens) > self.cache.free_cells:
                self.finish(item.seq, "length")
        return [i for i in items if i.seq.status is Status.RUNNING]
