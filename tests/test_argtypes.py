"""`jaxseeker.argtypes`: range-checked argparse types make a bad number a one-line usage error (exit status 2)."""

import argparse
import math

import pytest

from jaxseeker.argtypes import at_least, comma_list, comma_names, head_flags_problem


@pytest.mark.parametrize(
    "make, text, value",
    [
        (at_least(1), "1", 1),
        (at_least(1), "4096", 4096),
        (at_least(0), "0", 0),
        (at_least(0.0, float), "0", 0.0),
        (at_least(0.0, float), "0.25", 0.25),
        (at_least(0.0, float, above=True), "1e-9", 1e-9),
        (at_least(0.0, float, high=1.0), "1", 1.0),
        (at_least(0.0, float, high=1.0, below=True), "0.999", 0.999),
        (comma_list(at_least(1)), "8,32", (8, 32)),
        (comma_list(at_least(1)), " 2 , 4 ", (2, 4)),
        (
            comma_names(("search", "visit", "answer_submit")),
            "search, answer_submit,search",
            ("search", "answer_submit"),
        ),
        (comma_names(("search", "visit")), "", ()),
    ],
)
def test_values_in_range_parse_to_their_kind(make, text, value):
    parsed = make(text)
    assert parsed == value and type(parsed) is type(value)


@pytest.mark.parametrize(
    "make, text, message",
    [
        (at_least(1), "0", "must be an integer >= 1, got 0"),
        (at_least(2), "-3", "must be an integer >= 2, got -3"),
        (at_least(1), "1.5", "must be an integer >= 1, got '1.5'"),
        (at_least(1), "many", "must be an integer >= 1, got 'many'"),
        (at_least(0.0, float), "-0.1", "must be a number >= 0, got -0.1"),
        (at_least(0.0, float, above=True), "0", "must be a number > 0, got 0"),
        (at_least(0.0, float, high=1.0), "1.5", "must be a number >= 0 and <= 1, got 1.5"),
        (at_least(0.0, float, high=1.0, below=True), "1", "must be a number >= 0 and < 1, got 1"),
        (at_least(1.0, float), "nan", "must be a number >= 1, got nan"),
        (at_least(0.0, float), "inf", "must be a number >= 0, got inf"),
        (comma_list(at_least(1)), "8,0", "each value must be an integer >= 1, got 0 (in '8,0')"),
        (comma_list(at_least(1)), "8,,32", "must be comma-separated values, got '8,,32'"),
        (comma_list(at_least(1)), "", "must be comma-separated values, got ''"),
        (
            comma_names(("search", "visit")),
            "search,web,pyhton",
            "unknown 'web', 'pyhton' in 'search,web,pyhton'; known: search, visit",
        ),
    ],
)
def test_values_out_of_range_name_what_is_accepted(make, text, message):
    with pytest.raises(argparse.ArgumentTypeError) as err:
        make(text)
    assert str(err.value) == message


def test_a_parser_reports_the_flag_and_exits_with_status_2(capsys):
    parser = argparse.ArgumentParser(prog="prog")
    parser.add_argument("--seq-len", type=at_least(1), default=2048)
    parser.add_argument("--rate", type=at_least(0.0, float, high=1.0), default=0.5)
    assert (parser.parse_args([]).seq_len, parser.parse_args(["--rate", "1"]).rate) == (2048, 1.0)
    with pytest.raises(SystemExit) as exit_:
        parser.parse_args(["--seq-len", "0"])
    assert exit_.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == "prog: error: argument --seq-len: must be an integer >= 1, got 0"


def test_a_string_default_goes_through_the_type_too():
    parser = argparse.ArgumentParser()
    parser.add_argument("--concurrency", type=comma_list(at_least(1)), default="8,32")
    assert parser.parse_args([]).concurrency == (8, 32)


def test_only_int_and_float_are_kinds():
    with pytest.raises(TypeError, match="int or float"):
        at_least(1, str)
    assert math.isclose(at_least(0.5, float)("0.5"), 0.5)


def test_head_flags_make_an_attention_layer_or_say_why_not():
    assert head_flags_problem(64, 4, 2) is None
    assert head_flags_problem(64, 4, 3) == "--num-heads (4) must be a multiple of --num-kv-heads (3)"
    assert "must be even and >= 2, got 24 // 8 = 3" in head_flags_problem(24, 8, 8)
