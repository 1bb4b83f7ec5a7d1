"""A round's plan over a paged cache: the earliest requests take free pages first, a decode call's steps stay within
the pages a row holds, and the last request to come gives its pages back when none can go on."""

import numpy as np
import pytest

from jaxseeker.generation import schedule
from jaxseeker.generation.pages import Pages
from jaxseeker.generation.requests import Slot


def _slot(name: str, arrival: int, end: int, prefill: int = 0) -> Slot:
    """A running request of `end` written tokens and `prefill` more to write, 100 to sample."""
    return Slot(name, 0, list(range(prefill)), 7, 100, end=end, written=list(range(end)), arrival=arrival)


def test_the_earliest_request_takes_the_free_pages_first():
    """Two decoding requests at the end of their pages, one page free: the one that came first gets it."""
    pages = Pages(slots=2, row_pages=4, pages=5, page=8)
    slots = [_slot("late", arrival=1, end=16), _slot("early", arrival=0, end=16)]
    for row in (0, 1):
        pages.reserve(row, 16)
    schedule.reserve_decoding(slots, pages, steps=4, max_len=32)
    budget, events = schedule.decode_budget(slots, pages, steps=4, max_len=32)
    assert budget.tolist() == [0, 4] and events == []  # "late" waits for a page


def test_a_prefill_chunk_is_cut_to_the_pages_its_request_can_get():
    pages = Pages(slots=2, row_pages=4, pages=3, page=8)
    slots = [_slot("a", arrival=0, end=0, prefill=20), _slot("b", arrival=1, end=0, prefill=20)]
    assert schedule.prefill_room(slots, pages, chunk=16).tolist() == [16, 8]  # "b" gets the one page left


def test_when_no_request_can_go_on_the_last_to_come_is_written_again():
    pages = Pages(slots=2, row_pages=4, pages=4, page=8)
    slots = [_slot("first", arrival=0, end=16), _slot("second", arrival=1, end=16)]
    for row in (0, 1):
        pages.reserve(row, 16)
    schedule.preempt(slots, pages)
    second = slots[1]
    assert (second.end, second.prefill, second.written) == (0, list(range(16)), [])  # its tokens to prefill again
    assert pages.positions(1) == 0 and pages.free() == 2
    with pytest.raises(RuntimeError, match="'first' needs more than the 4 pages of 8 positions"):
        schedule.preempt(slots, pages)  # the only request holding pages: its context alone outgrows the pool


def test_a_part_of_the_pool_held_up_gives_back_its_own_last_request_while_the_other_part_goes_on():
    """Two parts of 4 pages: part 0's two requests hold 2 pages each and both want a third; part 1's request goes on.
    Part 0 alone is stuck, and its last request gives its pages back, not the later one of part 1."""
    pages = Pages(slots=4, row_pages=4, pages=4, page=8, shards=2)
    slots = [_slot("a", arrival=0, end=16), _slot("b", arrival=1, end=16), _slot("c", arrival=2, end=8), None]
    for row, end in ((0, 16), (1, 16), (2, 8)):
        pages.reserve(row, end)
    schedule.reserve_decoding(slots, pages, steps=4, max_len=32)
    budget, _ = schedule.decode_budget(slots, pages, steps=4, max_len=32)
    assert budget.tolist() == [0, 0, 4, 0]  # part 0 has no free page; part 1's "c" decodes
    assert schedule.stuck_parts(slots, pages, budget > 0) == [0]
    assert schedule.stuck_parts(slots, pages, np.ones(4, bool)) == []
    schedule.preempt(slots, pages, part=0)
    assert (slots[1].end, pages.positions(1), pages.positions(2)) == (0, 0, 16)  # "b" gives back; "c" keeps its own
    with pytest.raises(RuntimeError, match="'c' needs more than the 4 pages"):
        schedule.preempt(slots, pages, part=1)  # part 1's only holder
