"""`load_questions` on small files written here, including CSVs encrypted with the published schemes."""

import base64
import csv
import functools
import hashlib
import json

import pytest

from jaxseeker.eval import LoadError, decrypt_browsecomp, decrypt_xbench, load_questions

BROWSECOMP_CANARY = "BENCHMARK DATA SHOULD NEVER APPEAR AS PLAIN TEXT ONLINE. canary GUID test:1234"
XBENCH_CANARY = "xbench-canary-7"


def browsecomp_encrypt(plaintext, canary):
    """simple-evals' scheme, forwards: XOR with sha256(canary) repeated to length, then base64."""
    digest = hashlib.sha256(canary.encode()).digest()
    data = plaintext.encode()
    key = (digest * (len(data) // len(digest) + 1))[: len(data)]
    return base64.b64encode(bytes(a ^ b for a, b in zip(data, key))).decode()


def xbench_encrypt(plaintext, canary):
    """xbench's scheme, forwards: XOR with the canary's bytes repeated, then base64."""
    key = canary.encode()
    return base64.b64encode(bytes(b ^ key[i % len(key)] for i, b in enumerate(plaintext.encode()))).decode()


def write_csv(path, header, rows):
    with path.open("w", newline="", encoding="utf-8") as file:
        writer = csv.writer(file)
        writer.writerow(header)
        writer.writerows(rows)
    return path


def write_lines(path, lines):
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


# ---- JSONL / JSON ----------------------------------------------------------------------------


def test_jsonl_with_the_usual_question_keys(tmp_path):
    path = write_lines(
        tmp_path / "qa.jsonl",
        [
            json.dumps({"question": " Which river? ", "answer": "Nile", "tag": "sailor"}),
            "",
            json.dumps({"query": "Capital of France?", "answer": [["Paris", "paris, France"], ["Paris"]]}),
            json.dumps({"problem": "Year?", "answer": 1912, "id": "x9"}),
        ],
    )
    records = load_questions(path)
    assert records == [
        {"id": "qa:1", "question": "Which river?", "answer": "Nile", "tag": "sailor"},
        {"id": "qa:2", "question": "Capital of France?", "answer": ["Paris", "paris, France"]},
        {"id": "x9", "question": "Year?", "answer": "1912"},
    ]


def test_gaia_jsonl_keeps_its_fields(tmp_path):
    row = {
        "task_id": "c61d",
        "Question": "How many?",
        "Level": 2,
        "Final answer": "17",
        "file_name": "",
        "Annotator Metadata": {"Steps": "1. search"},
    }
    records = load_questions(write_lines(tmp_path / "metadata.jsonl", [json.dumps(row)]))
    assert records == [
        {
            "id": "c61d",
            "question": "How many?",
            "answer": "17",
            "level": 2,
            "file_name": "",
            "Annotator Metadata": {"Steps": "1. search"},
        }
    ]


def test_json_array_file(tmp_path):
    items = [
        {"Question": "Deadline?", "Answer": "March 21", "Info": {"Hop": "multi-source"}},
        {"Question": "Venue?", "Answer": ["Vienna", "Wien"]},
    ]
    path = tmp_path / "webwalker.json"
    path.write_text(json.dumps(items, indent=2), encoding="utf-8")
    records = load_questions(path)
    assert [r["id"] for r in records] == ["webwalker:1", "webwalker:2"]
    assert records[0]["Info"] == {"Hop": "multi-source"}
    assert records[1]["answer"] == ["Vienna", "Wien"]


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        (['{"question": "a", "answer": "b"}', '{"question": "c", "answer": '], r"bad\.jsonl:2: invalid JSON"),
        (['["not", "an", "object"]'], r"bad\.jsonl:1: expected a JSON object, got list"),
        (['{"text": "a", "answer": "b"}'], r"bad\.jsonl:1: no question field \(expected one of question, query"),
        (['{"question": "a"}'], r"bad\.jsonl:1: no answer field"),
        (['{"question": "  ", "answer": "b"}'], r"bad\.jsonl:1: field 'question' must be a non-empty string"),
        (['{"question": "a", "answer": {"x": 1}}'], r"bad\.jsonl:1: field 'answer': answer must be a string"),
        (['{"question": "a", "answer": []}'], r"bad\.jsonl:1: field 'answer': empty answer list"),
        (['{"question": "a", "answer": [[["deep"]]]}'], r"bad\.jsonl:1: field 'answer': answers nest at most two"),
        (
            ['{"question": "a", "answer": "b", "id": 7}', "", '{"question": "c", "answer": "d", "id": "7"}'],
            r"bad\.jsonl:3: duplicate id '7' \(first at .*bad\.jsonl:1\)",
        ),
    ],
)
def test_malformed_jsonl_rows_name_file_and_line(tmp_path, lines, message):
    with pytest.raises(LoadError, match=message):
        load_questions(write_lines(tmp_path / "bad.jsonl", lines))


def test_malformed_json_array_item_is_named(tmp_path):
    path = tmp_path / "gaia.json"
    path.write_text(json.dumps([{"Question": "a", "Final answer": "b"}, {"Question": "c"}]), encoding="utf-8")
    with pytest.raises(LoadError, match=r"gaia\.json:item 2: no answer field"):
        load_questions(path)


def test_empty_and_unknown_files(tmp_path):
    with pytest.raises(LoadError, match=r"empty\.jsonl: no questions"):
        load_questions(write_lines(tmp_path / "empty.jsonl", [""]))
    with pytest.raises(LoadError, match=r"unsupported file type '\.txt'"):
        load_questions(write_lines(tmp_path / "q.txt", ["hello"]))


# ---- encrypted CSV ---------------------------------------------------------------------------

LONG_PROBLEM = (
    "A footballer born in Zürich in the 1980s scored in a cup final that went to penalties; "
    "the stadium was renamed twice. What is the stadium's current name?"
)


def test_browsecomp_csv_is_decrypted(tmp_path):
    enc = functools.partial(browsecomp_encrypt, canary=BROWSECOMP_CANARY)
    path = write_csv(
        tmp_path / "browse_comp_test_set.csv",
        ["problem", "answer", "problem_topic", "canary"],
        [
            [enc(LONG_PROBLEM), enc("Stade de Genève"), "Sports", BROWSECOMP_CANARY],
            [enc("Short one?"), enc("42"), "Science & technology", BROWSECOMP_CANARY],
        ],
    )
    records = load_questions(path)
    assert records == [
        {"id": "browse_comp_test_set:1", "question": LONG_PROBLEM, "answer": "Stade de Genève", "topic": "Sports"},
        {"id": "browse_comp_test_set:2", "question": "Short one?", "answer": "42", "topic": "Science & technology"},
    ]


def test_xbench_csv_is_decrypted(tmp_path):
    enc = functools.partial(xbench_encrypt, canary=XBENCH_CANARY)
    path = write_csv(
        tmp_path / "DeepSearch.csv",
        ["id", "prompt", "type", "answer", "reference_steps", "canary"],
        [
            [
                "17",
                enc("2024 年哪位作家获得了诺贝尔文学奖？"),
                "search",
                enc("韩江"),
                enc("1. search the prize list"),
                XBENCH_CANARY,
            ],
            ["18", enc(LONG_PROBLEM), "search", enc("Stade de Genève"), "", XBENCH_CANARY],
        ],
    )
    first, second = load_questions(path)
    assert first == {
        "id": "17",
        "question": "2024 年哪位作家获得了诺贝尔文学奖？",
        "answer": "韩江",
        "type": "search",
        "reference_steps": "1. search the prize list",
    }
    assert (second["id"], second["question"], second["reference_steps"]) == ("18", LONG_PROBLEM, "")


def test_the_two_schemes_are_not_interchangeable():
    ciphertext = xbench_encrypt("Nile", "k")
    assert decrypt_xbench(ciphertext, "k") == "Nile"
    assert browsecomp_encrypt("Nile", "k") != ciphertext
    assert decrypt_browsecomp(browsecomp_encrypt("Nile", "k"), "k") == "Nile"


def test_plain_csv(tmp_path):
    path = write_csv(tmp_path / "plain.csv", ["question", "answer", "level"], [["Which river?", "Nile", "1"]])
    assert load_questions(path) == [{"id": "plain:1", "question": "Which river?", "answer": "Nile", "level": "1"}]


def test_malformed_encrypted_rows_name_file_and_line(tmp_path):
    enc = functools.partial(browsecomp_encrypt, canary=BROWSECOMP_CANARY)
    header = ["problem", "answer", "problem_topic", "canary"]
    good = [enc("Q?"), enc("A"), "Art", BROWSECOMP_CANARY]
    cases = [
        ([enc("Q?"), "not base64!!", "Art", BROWSECOMP_CANARY], r"bad\.csv:3: field 'answer' is not valid base64"),
        ([enc("Q?"), "Genève", "Art", BROWSECOMP_CANARY], r"bad\.csv:3: field 'answer' is not valid base64"),
        ([enc("Q?"), enc("A"), "Art", ""], r"bad\.csv:3: empty canary"),
        ([enc("Q?"), enc("A"), "Art", BROWSECOMP_CANARY, "extra"], r"bad\.csv:3: 5 fields, the header has 4"),
        ([enc("Q?"), enc("A")], r"bad\.csv:3: fewer fields than the header's 4"),
        (
            [browsecomp_encrypt("Què?", "another canary"), enc("A"), "Art", BROWSECOMP_CANARY],
            r"bad\.csv:3: field 'problem' does not decrypt to UTF-8 with this row's canary",
        ),
    ]
    for row, message in cases:
        with pytest.raises(LoadError, match=message):
            load_questions(write_csv(tmp_path / "bad.csv", header, [good, row]))


@pytest.mark.parametrize(
    ("header", "row", "message"),
    [
        (
            ["problem", "answer", "problem_topic"],
            [browsecomp_encrypt("Q?", BROWSECOMP_CANARY), browsecomp_encrypt("A", BROWSECOMP_CANARY), "Art"],
            r"nokey\.csv:2: field 'problem' looks encrypted \(base64\) but the file has no 'canary' column",
        ),
        (
            ["id", "prompt", "type", "answer", "reference_steps"],
            ["17", xbench_encrypt("Which river?", XBENCH_CANARY), "search", xbench_encrypt("Nile", XBENCH_CANARY), ""],
            r"nokey\.csv:2: field 'prompt' looks encrypted \(base64\) but the file has no 'canary' column",
        ),
    ],
)
def test_an_encrypted_csv_without_its_canary_column_is_an_error(tmp_path, header, row, message):
    with pytest.raises(LoadError, match=message):
        load_questions(write_csv(tmp_path / "nokey.csv", header, [row]))


def test_a_blank_canary_is_an_empty_canary(tmp_path):
    enc = functools.partial(browsecomp_encrypt, canary=BROWSECOMP_CANARY)
    path = write_csv(
        tmp_path / "blank.csv",
        ["problem", "answer", "problem_topic", "canary"],
        [[enc(LONG_PROBLEM), enc("Stade de Genève"), "Sports", "  "]],
    )
    with pytest.raises(LoadError, match=r"blank\.csv:2: empty canary"):
        load_questions(path)


def test_plain_csvs_with_the_benchmark_columns_but_no_canary_still_load(tmp_path):
    browsecomp = write_csv(
        tmp_path / "decrypted.csv",
        ["problem", "answer", "problem_topic"],
        [["Which river?", "Nile", "Geography"], ["Year?", "1912", "History"]],
    )
    assert [(r["question"], r["answer"]) for r in load_questions(browsecomp)] == [
        ("Which river?", "Nile"),
        ("Year?", "1912"),
    ]
    xbench = write_csv(tmp_path / "xbench_plain.csv", ["id", "prompt", "answer"], [["7", "2024 年哪位作家?", "韩江"]])
    assert load_questions(xbench) == [{"id": "7", "question": "2024 年哪位作家?", "answer": "韩江"}]


# ---- what the audit found ----------------------------------------------------------------------


def test_unicode_line_separators_inside_strings_are_not_line_ends(tmp_path):
    row = {"question": "Which line\u2028breaks here?", "answer": "next\x85line"}  # json.dumps leaves both as is
    path = tmp_path / "seps.jsonl"
    path.write_text(
        json.dumps(row, ensure_ascii=False) + "\n" + json.dumps({"question": "b", "answer": "c"}) + "\n",
        encoding="utf-8",
    )
    first, second = load_questions(path)
    assert (first["question"], first["answer"], second["id"]) == (
        "Which line\u2028breaks here?",
        "next\x85line",
        "seps:2",
    )


def test_a_file_that_is_not_utf8_or_not_there_is_named(tmp_path):
    (tmp_path / "latin1.csv").write_bytes("question,answer\nCafé?,yes\n".encode("latin-1"))
    with pytest.raises(LoadError, match=r"latin1\.csv:2: not UTF-8 text \(byte 0xe9\)"):
        load_questions(tmp_path / "latin1.csv")
    with pytest.raises(LoadError, match=r"missing\.jsonl: cannot read \(No such file or directory\)"):
        load_questions(tmp_path / "missing.jsonl")


@pytest.mark.parametrize("value", [{"Question": "a", "answer": "b", "Level": 1}, {"data": [{"Question": "a"}]}])
def test_a_json_object_over_several_lines_is_named_as_such(tmp_path, value):
    path = tmp_path / "gaia.json"
    path.write_text(json.dumps(value, indent=2), encoding="utf-8")
    with pytest.raises(
        LoadError, match=r"gaia\.json: one JSON value over several lines, not one question object a line"
    ):
        load_questions(path)


def test_csv_header_naming_a_column_twice_and_an_oversized_field(tmp_path):
    with pytest.raises(LoadError, match=r"twice\.csv:1: column 'answer' appears twice in the header"):
        load_questions(
            write_csv(tmp_path / "twice.csv", ["question", "answer", "answer"], [["Which?", "Nile", "Egypt"]])
        )
    huge = write_csv(tmp_path / "huge.csv", ["question", "answer"], [["Which?", "Nile"], ["Why?", "x" * 200_000]])
    with pytest.raises(LoadError, match=r"huge\.csv:3: field larger than field limit"):
        load_questions(huge)
    spaced = tmp_path / "spaced.csv"
    spaced.write_text("question, answer\nWhich river?,Nile\n")
    assert load_questions(spaced) == [{"id": "spaced:1", "question": "Which river?", "answer": "Nile"}]


def test_a_renamed_key_keeps_a_field_of_the_same_name(tmp_path):
    row = {"question": "a", "answer": "b", "Level": 3, "level": "hard", "problem_topic": "Art"}
    [record] = load_questions(write_lines(tmp_path / "both.jsonl", [json.dumps(row)]))
    assert record == {"id": "both:1", "question": "a", "answer": "b", "Level": 3, "level": "hard", "topic": "Art"}


DEEP = "[" * 100_000 + "]" * 100_000


@pytest.mark.parametrize(
    "name, text, message",
    [
        (
            "deep.jsonl",
            '{"question": "q", "answer": "a"}\n{"question": "q2", "answer": ' + DEEP + "}\n",
            "deep.jsonl:2: invalid JSON: arrays or objects nested deeper than 100",
        ),
        (
            "deep.json",
            '[{"question": "q", "answer": "a"},\n\n{"question": "q2", "answer": ' + DEEP + "}]",
            "deep.json:3: invalid JSON: arrays or objects nested deeper than 100",
        ),
        (
            "int.jsonl",
            '{"question": "q", "answer": "a", "n": ' + "9" * 5000 + "}\n",
            "int.jsonl:1: invalid JSON: an integer of 5000 digits (at most 4300 are read)",
        ),
        (
            "int.json",
            '[{"question": "q", "answer": "a"},\n{"question": "q", "answer": "a", "n": ' + "9" * 5000 + "}]",
            "int.json:2: invalid JSON: an integer of 5000 digits (at most 4300 are read)",
        ),
        (
            "lone.jsonl",
            '{"question": "q", "answer": "a"}\n{"question": "a\\ud800", "answer": "a"}\n',
            "lone.jsonl:2: a lone surrogate \\ud800 at character 2 of the string starting 'a\\ud800'",
        ),
        (
            "lone.json",
            '[{"question": "q", "answer": "a", "meta": {"k\\udc00": ["x"]}}]',
            "lone.json:item 1: a lone surrogate \\udc00 at character 2 of the string starting 'k\\udc00'",
        ),
    ],
)
def test_json_the_parser_cannot_take_or_the_eval_could_not_write_is_a_load_error(tmp_path, name, text, message):
    (tmp_path / name).write_text(text)
    with pytest.raises(LoadError) as caught:
        load_questions(tmp_path / name)
    assert str(caught.value) == f"{tmp_path / name}:{message.split(':', 1)[1]}"


def test_brackets_inside_strings_do_not_count_as_nesting(tmp_path):
    first = '{"question": "a \\\\\\" ' + "[" * 600 + '", "answer": "b"}'  # an escaped quote, then brackets
    (tmp_path / "q.json").write_text(f'[{first},\n\n{{"question": "q", "answer": {DEEP}}}]')
    with pytest.raises(LoadError, match=r"q.json:3: invalid JSON: arrays or objects nested deeper than 100"):
        load_questions(tmp_path / "q.json")


# ---- attacks: a question file that would crash, stall or flood the eval ---------------------------------------


def _caught(path):
    """The one-line message of the `LoadError` that loading `path` raises."""
    with pytest.raises(LoadError) as caught:
        load_questions(path)
    message = str(caught.value)
    assert "\n" not in message and len(message) < len(str(path)) + 400
    return message


def test_a_field_nested_985_deep_is_refused_at_load_time_naming_file_and_line(tmp_path):
    deep = "[" * 985 + '"a"' + "]" * 985
    jsonl = write_lines(
        tmp_path / "q.jsonl", ['{"question": "q", "answer": "a"}', f'{{"question": "q2", "answer": {deep}}}']
    )
    assert _caught(jsonl) == f"{jsonl}:2: invalid JSON: arrays or objects nested deeper than 100"
    array = tmp_path / "q.json"
    array.write_text(f'[\n{{"question": "q", "answer": "a"}},\n{{"question": "q2",\n "meta": {deep}}}\n]')
    assert _caught(array) == f"{array}:3: invalid JSON: arrays or objects nested deeper than 100"


@pytest.mark.parametrize("number", ["NaN", "Infinity", "-Infinity", "1e999"])
def test_an_answer_that_is_not_a_finite_number_is_refused(tmp_path, number):
    jsonl = write_lines(
        tmp_path / "nan.jsonl", ['{"question": "q", "answer": 1.5}', f'{{"question": "r", "answer": {number}}}']
    )
    assert _caught(jsonl).startswith(f"{jsonl}:2: invalid JSON: ")
    array = tmp_path / "nan.json"
    array.write_text(f'[{{"question": "q", "answer": 2}},\n\n{{"question": "r", "answer": [{number}]}}]')
    assert _caught(array).startswith(f"{array}:3: invalid JSON: ")


@pytest.mark.parametrize(
    ("row", "reason"),
    [
        ({"question": "q", "answer": {"text": "x" * 15_000_000}}, "field 'answer': answer must be a string"),
        ({"question": list(range(1_000_000)), "answer": "a"}, "field 'question' must be a non-empty string"),
        ({"question": "q", "answer": [[["y" * 1_000_000] * 3]]}, "field 'answer': answers nest at most two lists"),
    ],
    ids=["15 MB answer", "a million-item question", "deep answer list"],
)
def test_an_error_quotes_at_most_a_few_hundred_characters_of_a_huge_value(tmp_path, row, reason):
    path = tmp_path / "huge.jsonl"
    path.write_text(json.dumps(row) + "\n")
    assert _caught(path).startswith(f"{path}:1: {reason}")


def test_a_line_over_the_limit_is_named_without_being_parsed(tmp_path):
    path = tmp_path / "long.jsonl"
    with path.open("w") as f:
        f.write('{"question": "q", "answer": "a"}\n{"question": "' + "w" * (17 << 20) + '", "answer": "a"}\n')
    size = len('{"question": "') + (17 << 20) + len('", "answer": "a"}')
    assert _caught(path) == f"{path}:2: a line of {size:,} bytes, over the limit of 16,777,216 (max_line_bytes)"


@pytest.mark.parametrize(
    ("text", "line", "reason"),
    [
        ('[{"question": "q", "answer": "a"},\n]', 2, "invalid JSON: Expecting value (column 1)"),
        ('[{"question": "q", "answer": "a"}\n{"question": "r"}]', 2, "invalid JSON: expected ',' or ']' after item 1"),
        ('[{"question": "q", "answer": "a"}] []', 1, "invalid JSON: more text after the array"),
    ],
)
def test_a_json_array_read_an_item_at_a_time_is_still_strict_json(tmp_path, text, line, reason):
    path = tmp_path / "items.json"
    path.write_text(text)
    assert _caught(path) == f"{path}:{line}: {reason}"
    path.write_text("\ufeff \n[ ]")
    assert _caught(path) == f"{path}: no questions"


def test_a_json_array_or_csv_file_over_the_limit_is_refused_before_it_is_read(tmp_path):
    from jaxseeker.eval.loaders import MAX_FILE_BYTES

    for name, head in (("big.json", b"["), ("big.csv", b"question,answer\n")):
        path = tmp_path / name
        with path.open("wb") as f:  # sparse: the size without the disk
            f.write(head)
            f.truncate(MAX_FILE_BYTES + 1)
        assert _caught(path) == (
            f"{path}: {MAX_FILE_BYTES + 1:,} bytes, over the limit of {MAX_FILE_BYTES:,} for a CSV or JSON array "
            "file (write it as JSONL, one question a line)"
        )
