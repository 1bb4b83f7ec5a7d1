"""Trained tokenizers: digits one by one, names the same in every position (`names`), digit groups (`numbers`)."""

import pytest

from jaxseeker.data import load_tokenizer, train_tokenizer
from jaxseeker.errors import InputError

TEXTS = [
    'Sherwin Field Nr 1 Airport lies at an elevation of 494 m. {"query": ["Sherwin Field"]} <answer>Leakey</answer>',
    "What is the population of Lawrenceville (Illinois, US)? Lawrenceville has 4427 inhabitants.",
    "Everything hangs on Warwick (New York, US). Look up Warwick.",
    "The page of Sherwin Field says so. Look up Sherwin Field, then visit Sherwin Field.",
] * 20


def _pieces(tokenizer, text: str) -> list[str]:
    return [tokenizer.decode([i]) for i in tokenizer(text, add_special_tokens=False)["input_ids"]]


def _name_tokens(tokenizer, before: str, name: str = "Sherwin Field") -> list[int]:
    """The ids of the tokens that cover `name` when it follows `before`."""
    enc = tokenizer(before + name, add_special_tokens=False, return_offsets_mapping=True)
    return [i for i, (a, b) in zip(enc["input_ids"], enc["offset_mapping"]) if b > len(before)]


def test_every_digit_is_its_own_token(tmp_path):
    tok = train_tokenizer(TEXTS, 400, tmp_path)
    assert _pieces(tok, " 4427")[-4:] == ["4", "4", "2", "7"]


@pytest.mark.parametrize("before", ['["', "<answer>", "(", "\n"])
def test_names_split_tokenises_a_name_the_same_after_a_space_quote_or_tag(tmp_path, before):
    names = train_tokenizer(TEXTS, 400, tmp_path / "names", split="names")
    assert _name_tokens(names, before) == _name_tokens(names, "Everything hangs on ")
    qwen2 = train_tokenizer(TEXTS, 400, tmp_path / "qwen2")
    assert _name_tokens(qwen2, '["') != _name_tokens(qwen2, "Everything hangs on ")


def test_names_split_keeps_spaces_on_lower_case_words_and_round_trips(tmp_path):
    train_tokenizer(TEXTS, 400, tmp_path, split="names")
    tok = load_tokenizer(tmp_path)
    assert " hangs" in _pieces(tok, "Everything hangs on Warwick")
    assert tok.decode(tok(TEXTS[0], add_special_tokens=False)["input_ids"]) == TEXTS[0]


def test_an_unknown_split_is_an_error():
    with pytest.raises(ValueError, match=r"split must be one of \['names', 'numbers', 'qwen2'\], got 'bert'"):
        train_tokenizer(TEXTS, 400, split="bert")


def test_numbers_split_makes_each_group_of_three_digits_from_the_right_one_token(tmp_path):
    train_tokenizer(TEXTS, 1600, tmp_path, split="numbers")
    tok = load_tokenizer(tmp_path)
    assert [_pieces(tok, n) for n in ("4,427", "4427", "20614", "1887", "7")] == [
        ["4", ",", "427"],
        ["4", "427"],
        ["20", "614"],
        ["1", "887"],
        ["7"],
    ]
    assert all(len(_pieces(tok, f"{n:03d}")) == 1 for n in range(1000))
    assert _name_tokens(tok, '["') == _name_tokens(tok, "Everything hangs on ")
    assert tok.decode(tok(TEXTS[1], add_special_tokens=False)["input_ids"]) == TEXTS[1]
    with pytest.raises(ValueError, match="vocab_size=1000 must be at least 1377"):
        train_tokenizer(TEXTS, 1000, split="numbers")


def test_dropped_thousands_separators_make_a_pages_number_its_answers_tokens(tmp_path):
    train_tokenizer(TEXTS, 1600, tmp_path, split="numbers", drop_thousands_separators=True)
    tok = load_tokenizer(tmp_path)
    assert _pieces(tok, "4,427") == _pieces(tok, "4427") == ["4", "427"]
    assert _pieces(tok, "1,234,567") == ["1", "234", "567"]
    assert _pieces(tok, "(Illinois, US), 12, 345 and 1,23")[-3:] == ["1", ",", "23"]  # other commas stay
    text = "Lawrenceville has a population of 4,427."
    enc = tok(text, add_special_tokens=False, return_offsets_mapping=True)
    assert [text[a:b] for a, b in enc["offset_mapping"]][-3:] == ["4", "427", "."]  # offsets into the original


def test_a_directory_without_a_usable_tokenizer_is_named(tmp_path):
    (tmp_path / "config.json").write_text('{"model_type": "qwen3"}')  # transformers 5 would make an empty tokenizer
    with pytest.raises(InputError, match=f"^{tmp_path}: no tokenizer in this directory \\(none of tokenizer.json, "):
        load_tokenizer(tmp_path)
    (tmp_path / "vocab.json").write_text("{}")  # a vocabulary without the rest of a tokenizer
    with pytest.raises(InputError, match=f"^{tmp_path}: no tokenizer loads from this directory "):
        load_tokenizer(tmp_path)
    (tmp_path / "vocab.json").unlink()
    (tmp_path / "tokenizer.json").write_text('{"version": "1.0",\n  "model": }')
    with pytest.raises(InputError, match=f"^{tmp_path / 'tokenizer.json'}:2: not a JSON file"):
        load_tokenizer(tmp_path)
    with pytest.raises(FileNotFoundError, match="tokenizer directory not found"):
        load_tokenizer(tmp_path / "nowhere")
