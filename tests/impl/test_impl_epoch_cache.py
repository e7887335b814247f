"""R2, R3, R4: LeaderEpochFileCache.assign / end_offset_for / truncate_from_end / _start."""

from __future__ import annotations

import pytest

from kreplica.impl.epoch_cache import EpochEntry, LeaderEpochFileCache
from kreplica.impl.messages import UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET

UNDEF = (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)


def cache_with(*entries: tuple[int, int], leo: int = 100) -> LeaderEpochFileCache:
    cache = LeaderEpochFileCache(lambda: leo)
    for epoch, start in entries:
        cache.assign(epoch, start)
    return cache


def pairs(cache: LeaderEpochFileCache) -> list[tuple[int, int]]:
    return [(e.epoch, e.start_offset) for e in cache.entries]


# ------------------------------------------------------------------------------------- R2


def test_r2_assign_appends_to_empty_cache() -> None:
    cache = cache_with()
    cache.assign(2, 5)
    assert cache.entries == [EpochEntry(2, 5)]


def test_r2_assign_same_epoch_later_start_is_noop() -> None:
    cache = cache_with((1, 0), (2, 5))
    cache.assign(2, 7)
    assert pairs(cache) == [(1, 0), (2, 5)]


def test_r2_assign_same_epoch_same_start_is_noop() -> None:
    cache = cache_with((2, 5))
    cache.assign(2, 5)
    assert pairs(cache) == [(2, 5)]


def test_r2_assign_same_epoch_earlier_start_replaces_entry() -> None:
    cache = cache_with((1, 0), (2, 5))
    cache.assign(2, 3)
    assert pairs(cache) == [(1, 0), (2, 3)]


def test_r2_assign_lower_epoch_drops_higher_entries() -> None:
    cache = cache_with((1, 0), (3, 4), (5, 8))
    cache.assign(2, 6)
    assert pairs(cache) == [(1, 0), (2, 6)]


def test_r2_assign_higher_epoch_lower_start_drops_entries_at_or_after_start() -> None:
    cache = cache_with((1, 0), (2, 5), (3, 9))
    cache.assign(4, 5)
    assert pairs(cache) == [(1, 0), (4, 5)]


def test_r2_assign_new_epoch_appends() -> None:
    cache = cache_with((1, 0), (2, 5))
    cache.assign(4, 9)
    assert pairs(cache) == [(1, 0), (2, 5), (4, 9)]


def test_r2_assign_negative_epoch_is_an_error() -> None:
    cache = cache_with((1, 0))
    with pytest.raises(ValueError):
        cache.assign(-1, 3)
    assert pairs(cache) == [(1, 0)]


def test_r2_assign_takes_a_negative_start_offset_as_kafka_does() -> None:
    """Kafka 2.6.3's LeaderEpochFileCache.validateAndMaybeWarn rejects a negative epoch only; an
    entry with a negative start offset is appended, and every entry that does not start
    below it goes (truncateAndAppend)."""
    cache = cache_with((1, 0), (2, 5))
    cache.assign(3, -3)
    assert pairs(cache) == [(3, -3)]


# ------------------------------------------------------------------------------------- R3


def test_r3_end_offset_for_case_a_undefined_epoch() -> None:
    assert cache_with((1, 0)).end_offset_for(UNDEFINED_EPOCH) == UNDEF


def test_r3_end_offset_for_case_b_empty_cache() -> None:
    assert cache_with().end_offset_for(3) == UNDEF


def test_r3_end_offset_for_case_c_latest_epoch_gives_leo() -> None:
    cache = cache_with((1, 0), (4, 6), leo=11)
    assert cache.end_offset_for(4) == (4, 11)


def test_r3_end_offset_for_case_d_no_higher_epoch() -> None:
    cache = cache_with((1, 0), (4, 6), leo=11)
    assert cache.end_offset_for(7) == UNDEF


def test_r3_end_offset_for_case_e_no_lower_or_equal_epoch() -> None:
    cache = cache_with((3, 2), (4, 6), leo=11)
    assert cache.end_offset_for(1) == (1, 2)


def test_r3_end_offset_for_case_f_largest_epoch_below_and_next_start() -> None:
    cache = cache_with((1, 0), (2, 3), (5, 7), leo=11)
    assert cache.end_offset_for(2) == (2, 7)
    # epoch 3 is unknown: answer the largest epoch <= 3 and the start of the next one
    assert cache.end_offset_for(3) == (2, 7)
    assert cache.end_offset_for(1) == (1, 3)


def test_r3_kip101_answer_has_no_epoch_and_next_epoch_start() -> None:
    cache = cache_with((1, 0), (3, 2), leo=3)
    assert cache.end_offset_for_kip101(2) == (UNDEFINED_EPOCH, 2)
    assert cache.end_offset_for_kip101(3) == (UNDEFINED_EPOCH, 3)
    assert cache.end_offset_for_kip101(0) == UNDEF
    assert cache.end_offset_for_kip101(9) == UNDEF


# ------------------------------------------------------------------------------------- R4


def test_r4_truncate_from_end_drops_entries_at_or_after_offset() -> None:
    cache = cache_with((1, 0), (2, 5), (3, 8))
    cache.truncate_from_end(5)
    assert pairs(cache) == [(1, 0)]


def test_r4_truncate_from_end_noop_when_last_start_below_offset() -> None:
    cache = cache_with((1, 0), (2, 5))
    cache.truncate_from_end(6)
    assert pairs(cache) == [(1, 0), (2, 5)]


def test_r4_truncate_from_end_negative_offset_is_noop() -> None:
    cache = cache_with((1, 0), (2, 5))
    cache.truncate_from_end(-1)
    assert pairs(cache) == [(1, 0), (2, 5)]


def test_r4_truncate_from_start_rewrites_last_entry_at_or_below_offset() -> None:
    cache = cache_with((1, 0), (2, 5), (3, 8))
    cache.truncate_from_start(6)
    assert pairs(cache) == [(2, 6), (3, 8)]


def test_r4_truncate_from_start_is_exclusive_of_entries_above() -> None:
    cache = cache_with((1, 0), (2, 5), (3, 8))
    cache.truncate_from_start(8)
    assert pairs(cache) == [(3, 8)]


def test_r4_truncate_from_start_below_first_entry_is_noop() -> None:
    cache = cache_with((2, 5), (3, 8))
    cache.truncate_from_start(3)
    assert pairs(cache) == [(2, 5), (3, 8)]
