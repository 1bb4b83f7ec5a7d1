"""The engine's host-side stop check (`generation.requests.Stops`) on a stand-in detokenizer: token i reads as one
letter, 'a' + i; token 25 holds part of a multi-byte character."""

from jaxseeker.generation.requests import Stops


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
