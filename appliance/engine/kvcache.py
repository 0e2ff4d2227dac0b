"""KV ledger and prefix cache over llama.cpp's unified KV cache. Pure Python.

llama.cpp's unified cache is paged at one-token granularity: each cell holds one token's K/V
and the set of sequence ids that see it. `llama_memory_seq_cp` adds a sequence id to existing
cells (no copy). This module mirrors that exactly, so that the ledger counts shared cells once:

- a *slot* is a llama.cpp seq_id; it holds a list of cell ids, one per token in its KV;
- a cell lives while at least one slot references it;
- a token-level trie over the slots' token contents finds the longest cached prefix;
- finished sequences may stay as *cached* slots (LRU), first to go under memory pressure.

The ledger drives admission, metrics and `appliance plan`; the `memory` object passed in
(the llama runner, or a fake in tests) performs the matching llama.cpp calls.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Protocol


class KVMemory(Protocol):
    """The llama.cpp memory calls the ledger mirrors."""

    def seq_cp(self, src: int, dst: int, p0: int, p1: int) -> None: ...
    def seq_rm(self, seq: int, p0: int, p1: int) -> None: ...


@dataclass
class _Node:
    children: dict[int, _Node] = field(default_factory=dict)
    slots: set[int] = field(default_factory=set)
    parent: _Node | None = None
    token: int = -1


@dataclass
class _Slot:
    cells: list[int] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)
    path: list[_Node] = field(default_factory=list)  # trie node per token
    cached: bool = False
    last_used: float = 0.0


class KVCache:
    """Cells, slots, the prefix trie and LRU eviction of cached prefixes."""

    def __init__(self, n_cells: int, n_slots: int, memory: KVMemory,
                 bytes_per_token: int = 0) -> None:
        self.n_cells = n_cells
        self.n_slots = n_slots
        self.bytes_per_token = bytes_per_token
        self._memory = memory
        self._refs: dict[int, int] = {}
        self._free_ids = list(range(n_cells - 1, -1, -1))
        self._slots: dict[int, _Slot] = {}
        self._root = _Node()
        self.evictions = 0

    # -- ledger queries ----------------------------------------------------------------
    @property
    def used_cells(self) -> int:
        """Cells holding a token for at least one slot (shared cells counted once)."""
        return len(self._refs)

    @property
    def free_cells(self) -> int:
        return self.n_cells - len(self._refs)

    def live_cells(self) -> int:
        """Cells referenced by at least one running (non-cached) slot."""
        live: set[int] = set()
        for s in self._slots.values():
            if not s.cached:
                live.update(s.cells)
        return len(live)

    def cached_cells(self) -> int:
        """Cells only cached prefixes hold: what eviction can give back."""
        return self.used_cells - self.live_cells()

    def free_slots(self) -> int:
        return self.n_slots - len(self._slots)

    def cached_slots(self) -> list[int]:
        """Cached slots, least recently used first."""
        cached = [(s.last_used, sid) for sid, s in self._slots.items() if s.cached]
        return [sid for _, sid in sorted(cached)]

    def snapshot(self) -> dict[str, int]:
        live = self.live_cells()
        return {"kv_cells_total": self.n_cells, "kv_cells_used": self.used_cells,
                "kv_cells_live": live, "kv_cells_cached": self.used_cells - live,
                "kv_cells_free": self.free_cells, "kv_bytes_per_token": self.bytes_per_token,
                "kv_bytes_used": self.used_cells * self.bytes_per_token,
                "slots_used": len(self._slots), "slots_cached": len(self.cached_slots()),
                "prefix_evictions": self.evictions}

    # -- prefix matching ---------------------------------------------------------------
    def match(self, tokens: list[int]) -> tuple[int | None, int]:
        """Longest prefix of `tokens` held by any slot: (slot, length), or (None, 0)."""
        node, depth, best = self._root, 0, (None, 0)
        for tok in tokens:
            child = node.children.get(tok)
            if child is None or not child.slots:
                break
            node, depth = child, depth + 1
            best = (self._prefer(child.slots), depth)
        return best

    def _prefer(self, slots: set[int]) -> int:
        # Any holder shares the same cells for this prefix; prefer a live one so the cached
        # copy stays evictable.
        for sid in slots:
            if not self._slots[sid].cached:
                return sid
        return next(iter(slots))

    # -- mutations ---------------------------------------------------------------------
    def allocate(self) -> int | None:
        """A free slot id (registered empty), or None when every slot is taken."""
        for sid in range(self.n_slots):
            if sid not in self._slots:
                self._slots[sid] = _Slot(last_used=time.monotonic())
                return sid
        return None

    def share(self, src: int, dst: int, n: int) -> None:
        """Give empty slot `dst` the first `n` tokens of `src` (llama_memory_seq_cp: no copy)."""
        s, d = self._slots[src], self._slots[dst]
        if d.cells:
            raise ValueError("share() needs an empty destination slot")
        if n > len(s.tokens):
            raise ValueError(f"slot {src} holds {len(s.tokens)} tokens, asked for {n}")
        self._memory.seq_cp(src, dst, 0, n)
        for cell in s.cells[:n]:
            self._refs[cell] += 1
        d.cells = s.cells[:n]
        d.tokens = s.tokens[:n]
        d.path = s.path[:n]
        for node in d.path:
            node.slots.add(dst)
        s.last_used = time.monotonic()

    def append(self, slot: int, tokens: list[int]) -> None:
        """Record that `tokens` were decoded into `slot` (one new cell each)."""
        if len(tokens) > self.free_cells:
            raise MemoryError(f"ledger: {len(tokens)} tokens do not fit in {self.free_cells} cells")
        s = self._slots[slot]
        node = s.path[-1] if s.path else self._root
        for tok in tokens:
            cell = self._free_ids.pop()
            self._refs[cell] = 1
            s.cells.append(cell)
            s.tokens.append(tok)
            child = node.children.get(tok)
            if child is None:
                child = node.children[tok] = _Node(parent=node, token=tok)
            child.slots.add(slot)
            s.path.append(child)
            node = child
        s.last_used = time.monotonic()

    def truncate(self, slot: int, n: int) -> None:
        """Drop tokens from position `n` on (llama_memory_seq_rm(slot, n, -1))."""
        s = self._slots[slot]
        if n >= len(s.tokens):
            return
        self._memory.seq_rm(slot, n, -1)
        self._drop(slot, s.cells[n:], s.path[n:])
        del s.cells[n:], s.tokens[n:], s.path[n:]

    def release(self, slot: int) -> None:
        """Free a slot and its references (llama_memory_seq_rm(slot, -1, -1))."""
        s = self._slots.pop(slot)
        self._memory.seq_rm(slot, -1, -1)
        self._drop(slot, s.cells, s.path)

    def park(self, slot: int) -> None:
        """Keep a finished sequence's KV as a cached prefix."""
        s = self._slots[slot]
        s.cached = True
        s.last_used = time.monotonic()

    def is_cached(self, slot: int) -> bool:
        return slot in self._slots and self._slots[slot].cached

    def take_over(self, slot: int, n: int) -> int:
        """Reuse a cached slot for a new sequence that shares its first `n` tokens."""
        self.truncate(slot, n)
        s = self._slots[slot]
        s.cached = False
        s.last_used = time.monotonic()
        return slot

    def evict_one(self, keep: int | None = None) -> bool:
        """Release the least recently used cached slot (not `keep`). False if none."""
        for sid in self.cached_slots():
            if sid != keep:
                self.release(sid)
                self.evictions += 1
                return True
        return False

    def _drop(self, slot: int, cells: list[int], path: list[_Node]) -> None:
        for cell in cells:
            self._refs[cell] -= 1
            if self._refs[cell] == 0:
                del self._refs[cell]
                self._free_ids.append(cell)
        for node in reversed(path):
            node.slots.discard(slot)
            if not node.slots and not node.children and node.parent is not None:
                del node.parent.children[node.token]
