"""Pure ledger tests: shared cells counted once, trie matching, LRU eviction."""

import pytest

from appliance.engine.kvcache import KVCache


class FakeMemory:
    def __init__(self):
        self.calls = []

    def seq_cp(self, src, dst, p0, p1):
        self.calls.append(("cp", src, dst, p0, p1))

    def seq_rm(self, seq, p0, p1):
        self.calls.append(("rm", seq, p0, p1))


def make(n_cells=100, n_slots=4):
    mem = FakeMemory()
    return KVCache(n_cells, n_slots, mem, bytes_per_token=10), mem


def test_shared_prefix_counted_once():
    kv, mem = make()
    a = kv.allocate()
    kv.append(a, list(range(30)))
    b = kv.allocate()
    kv.share(a, b, 20)
    kv.append(b, [900, 901])
    assert kv.used_cells == 32
    assert mem.calls == [("cp", a, b, 0, 20)]
    assert kv.snapshot()["kv_bytes_used"] == 320


def test_match_longest_prefix_and_partial():
    kv, _ = make()
    a = kv.allocate()
    kv.append(a, [1, 2, 3, 4, 5])
    assert kv.match([1, 2, 3, 9]) == (a, 3)
    assert kv.match([7]) == (None, 0)
    assert kv.match([1, 2, 3, 4, 5, 6]) == (a, 5)


def test_release_frees_only_unshared_cells_and_prunes_trie():
    kv, mem = make()
    a = kv.allocate()
    kv.append(a, [1, 2, 3])
    b = kv.allocate()
    kv.share(a, b, 2)
    kv.append(b, [8])
    kv.release(a)
    assert kv.used_cells == 3  # b keeps the two shared cells plus its own
    assert kv.match([1, 2, 3]) == (b, 2)
    kv.release(b)
    assert kv.used_cells == 0 and kv.free_cells == 100
    assert kv.match([1]) == (None, 0)
    assert ("rm", b, -1, -1) in mem.calls


def test_cached_slots_lru_and_cached_cells():
    kv, _ = make()
    a, b = kv.allocate(), kv.allocate()
    kv.append(a, [1, 2])
    kv.append(b, [3, 4, 5])
    kv.park(a)
    kv.park(b)
    assert kv.cached_slots() == [a, b]
    assert kv.cached_cells() == 5 and kv.live_cells() == 0
    assert kv.evict_one(keep=a) is True
    assert kv.cached_slots() == [a]
    assert kv.evict_one(keep=a) is False


def test_truncate_and_overflow():
    kv, mem = make(n_cells=5)
    a = kv.allocate()
    kv.append(a, [1, 2, 3, 4])
    kv.truncate(a, 2)
    assert kv.used_cells == 2 and ("rm", a, 2, -1) in mem.calls
    with pytest.raises(MemoryError):
        kv.append(a, [5, 6, 7, 8])


def test_slots_exhaust():
    kv, _ = make(n_slots=2)
    assert kv.allocate() == 0 and kv.allocate() == 1 and kv.allocate() is None
    assert kv.free_slots() == 0
