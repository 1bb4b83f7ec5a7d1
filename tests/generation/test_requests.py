"""The engine's host-side bookkeeping: the stop check (`generation.requests.Stops`) on a stand-in detokenizer (token i
reads as one letter, 'a' + i; token 25 holds part of a multi-byte character), and the rows of each prefill call."""

import numpy as np

from jaxseeker.generation.requests import Slot, Stops, call_rows, prefill_batch


class Letters:
    """Token ids → text, counting the calls that decode more than one token (a tail of the turn)."""

    def __init__(self) -> None:
        self.tails = 0

    def __call__(self, ids: list[int]) -> str:
        self.tails += len(ids) > 1
        return "".join("\ufffd" if i == 25 else chr(ord("a") + i) for i in ids)


def test_a_stop_string_is_cut_after_its_last_token_even_across_calls():
    decode = Letters()
    stops = Stops([], ["cd"], decode)
    assert stops.find([], [0, 1, 2]) == (3, None, None)  # "abc": no token can end "cd", no tail decoded
    assert decode.tails == 0
    assert stops.find([0, 1, 2], [3, 4]) == (1, "stop", "cd")  # "c" then "d": cut after the "d"
    assert stops.find([], [3, 2, 3, 0]) == (3, "stop", "cd")  # a "d" before the "c" does not stop


def test_a_partial_character_or_a_trailing_space_stop_always_decodes_the_tail():
    decode = Letters()
    assert Stops([], ["cd"], decode).find([], [25, 0]) == (2, None, None)
    assert decode.tails == 1
    spaced = Letters()
    assert Stops([], ["b "], spaced).find([], [0, 2]) == (2, None, None)
    assert spaced.tails == 1


def test_an_eos_id_ends_the_turn_first():
    assert Stops([4], ["cd"], Letters()).find([], [0, 4, 2, 3]) == (2, "eos", "e")
    assert Stops([4], [], None).find([], [0, 4]) == (2, "eos", "4")


def test_a_prefill_call_pads_its_rows_to_a_power_of_two_only_where_an_eighth_of_it_or_less_is_padding():
    assert [call_rows(k, 32) for k in (1, 2, 3, 4, 5, 7, 8, 9, 15, 17, 24, 28, 29, 32)] == [
        *(1, 2, 2, 4, 4, 8, 8, 8, 16, 16, 16, 32, 32, 32)
    ]
    assert call_rows(5, 6) == 4 and call_rows(6, 6) == 6  # at most every slot


def test_prefill_calls_take_the_longest_contexts_first_and_leave_the_rest_to_the_next_call():
    """Five slots of 8 with 200 tokens to write: calls of the 4 longest contexts, then of the fifth alone (not calls
    of 8 rows, 3 of them padding); every token is written once, in order."""
    ends = [30, 0, 50, 10, 40, 0, 20, 0]
    slots = [
        Slot(f"r{i}", i, list(range(200)), 0, 8, end=e) if i in (0, 2, 3, 4, 6) else None for i, e in enumerate(ends)
    ]
    calls, written = [], {}
    while (batch := prefill_batch(slots, 128, np.full(8, 10**6))) is not None:
        rows, tokens, counts = batch
        calls.append((rows.tolist(), counts.tolist()))
        for row, toks, count in zip(rows.tolist(), tokens.tolist(), counts.tolist(), strict=True):
            written.setdefault(row, []).extend(toks[:count])
    assert calls == [
        ([2, 4, 0, 6], [128] * 4),  # the longest four contexts
        ([2, 4, 0, 6], [72] * 4),  # still the longest
        ([3], [128]),
        ([3], [72]),
    ]
    assert written == {row: list(range(200)) for row in (0, 2, 3, 4, 6)}
    assert [s.end for s in slots if s is not None] == [230, 250, 210, 240, 220]


def test_a_prefill_chunk_takes_no_more_than_the_slots_pages_hold():
    """Room for 50 tokens (its pages end there) and for none (no page free): the first writes 50, the second waits;
    with every slot in order, the call runs all four."""
    slots = [Slot("a", 0, list(range(100)), 0, 8), Slot("b", 1, list(range(100)), 0, 8), None, None]
    rows, _, counts = prefill_batch(slots, 64, np.array([50, 0, 0, 0]))
    assert (rows.tolist(), counts.tolist()) == ([0], [50])
    assert prefill_batch(slots, 64, np.zeros(4, np.int64)) is None
    rows, _, counts = prefill_batch(slots, 64, np.array([64, 64, 0, 0]), every=True)
    assert (rows.tolist(), counts.tolist()) == ([0, 1, 2, 3], [50, 64, 0, 0])
