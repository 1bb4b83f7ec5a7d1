"""TextStream: incremental detokenization, stop strings across tokens, the streaming hold-back."""

import pytest

from jaxseeker.serve import TextStream


def byte_decode(ids: list[int]) -> str:
    """A byte-level detokenizer: token i is byte i (a multi-byte character spans several tokens)."""
    return bytes(ids).decode("utf-8", errors="replace")


def feed(stream: TextStream, text: str, *, every_step: bool = True) -> list[str]:
    """Push the bytes of `text`; the pieces `take()` released after each token (the last one final)."""
    pieces = []
    for b in text.encode("utf-8"):
        if stream.push(b, -float(b)):
            break
        if every_step:
            pieces.append(stream.take()[0])
    pieces.append(stream.take(final=True)[0])
    return pieces


def test_multibyte_characters_come_out_whole():
    stream = TextStream(byte_decode)
    pieces = feed(stream, "a€b")  # € is three bytes
    assert pieces == ["a", "", "", "€", "b", ""]
    assert stream.text == "a€b" and stream.stop is None


def test_a_stop_string_split_over_tokens_cuts_the_text_and_is_never_streamed():
    stream = TextStream(byte_decode, stop=("END", "xyz"))
    pieces = feed(stream, "one EN two ENDthree")
    assert "".join(pieces) == "one EN two " and stream.text == "one EN two "
    assert stream.stop == "END"
    streamed = ""
    for piece in pieces:  # nothing reached the client that the final text does not hold ("E", "EN" were held)
        streamed += piece
        assert "one EN two ".startswith(streamed)
    assert pieces[:8] == ["o", "n", "e", " ", "", "", "EN ", "t"]  # "EN" held back until " " showed it is no stop


def test_tokens_and_logprobs_go_out_with_their_text_and_stop_tokens_do_not():
    stream = TextStream(byte_decode, stop=("cd",))
    released = []
    for b in b"abcde":
        ended = stream.push(b, -float(b))
        released.append(stream.take(final=ended))
        if ended:
            break
    text = "".join(r[0] for r in released)
    tokens = [t for r in released for t in r[1]]
    logprobs = [lp for r in released for lp in r[2]]
    assert text == "ab" and tokens == list(b"ab") and logprobs == [-97.0, -98.0]
    assert stream.tokens == list(b"abcd")  # the stop's tokens were sampled, just not returned


def test_the_earliest_stop_wins_and_push_after_a_stop_is_an_error():
    stream = TextStream(byte_decode, stop=("zz", "b"))
    assert not stream.push(ord("a"), 0.0)
    assert stream.push(ord("b"), 0.0)
    assert (stream.text, stream.stop) == ("a", "b")
    with pytest.raises(ValueError, match="already ended"):
        stream.push(ord("c"), 0.0)
    with pytest.raises(ValueError, match="non-empty"):
        TextStream(byte_decode, stop=("",))


def test_the_final_take_decodes_an_incomplete_last_character_as_the_tokenizer_does():
    stream = TextStream(byte_decode)
    data = "ok €".encode()[:-1]  # the euro sign's last byte never came
    for b in data:
        stream.push(b, 0.0)
    assert stream.take() == ("ok ", list(b"ok "), [0.0] * 3)
    text, tokens, _ = stream.take(final=True)
    assert (stream.text, text, tokens) == (byte_decode(list(data)), byte_decode(list(data))[3:], list(data[3:]))
