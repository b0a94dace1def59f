"""graph/lru.py: the byte-bounded LRU map behind the frame cache."""

from __future__ import annotations

from graph.lru import ByteLRU


def test_the_least_recently_used_entries_go_first():
    lru = ByteLRU(100)
    lru.put("a", 1, 40)
    lru.put("b", 2, 40)
    assert lru.get("a") == 1  # "b" is now the oldest
    lru.put("c", 3, 40)
    assert lru.get("b") is None and lru.get("a") == 1 and lru.get("c") == 3 and lru.nbytes == 80


def test_an_entry_bigger_than_the_bound_is_not_kept_and_evicts_nothing():
    # it evicted every other entry and then stayed, holding more than the bound
    lru = ByteLRU(100)
    lru.put("a", 1, 40)
    lru.put("b", 2, 40)
    lru.put("big", 3, 101)
    assert lru.get("big") is None and lru.get("a") == 1 and lru.get("b") == 2 and lru.nbytes == 80
    lru.put("a", 4, 101)  # a new value too big for the map: the old one is stale, not kept either
    assert lru.get("a") is None and lru.get("b") == 2 and lru.nbytes == 40
    lru.put("whole", 5, 100)  # exactly the bound fits (alone)
    assert lru.get("whole") == 5 and lru.get("b") is None and lru.nbytes == 100
