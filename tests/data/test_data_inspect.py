"""`inspect_files`: counts that match the tokenizer, and every bad line as FILE:LINE: reason."""

import json

import pytest

from jaxseeker.data import inspect_files, tokenize_chat

from .samples import openseeker_messages, webdancer_messages


def test_summary_counts_and_bad_lines(write_jsonl, qwen_tokenizer):
    path = write_jsonl(
        "mix.jsonl",
        [
            {"messages": webdancer_messages()},
            "{nope",
            {"prompt": "Capital?", "completion": "<answer>Paris</answer>"},
            {"messages": [{"role": "user", "content": "q"}]},
            {"messages": openseeker_messages()},
        ],
    )
    summary = inspect_files([path], qwen_tokenizer)

    tokenized = [
        tokenize_chat(m, qwen_tokenizer)
        for m in (
            webdancer_messages(),
            [{"role": "user", "content": "Capital?"}, {"role": "assistant", "content": "<answer>Paris</answer>"}],
            openseeker_messages(),
        )
    ]
    tokens = sum(ids.size for ids, _ in tokenized)
    trained = sum(int(mask.sum()) for _, mask in tokenized)
    assert summary["files"] == [path]
    assert summary["records"] == 3
    assert summary["tokens"] == tokens and summary["trained_tokens"] == trained
    assert summary["trained_fraction"] == pytest.approx(trained / tokens)
    assert summary["assistant_turns"] == 3 + 1 + 3
    assert summary["tool_calls"] == 2 + 0 + 2
    assert summary["observations"] == 2 + 0 + 2
    assert summary["tokens_per_record"]["max"] == max(ids.size for ids, _ in tokenized)
    assert [b.split(": ")[0] for b in summary["bad_lines"]] == [f"{path}:2", f"{path}:4"]
    assert "invalid JSON" in summary["bad_lines"][0] and "no assistant message" in summary["bad_lines"][1]


def test_a_line_of_200_mb_is_one_bad_line_not_a_crash_in_the_tokenizer(tmp_path, qwen_tokenizer):
    from jaxseeker.jsonl import MAX_LINE_BYTES

    path = tmp_path / "huge.jsonl"
    head = '{"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "'
    chunk = "Lyon was founded first. " * (1 << 15)  # 768 KiB, written a chunk at a time
    with path.open("w") as f:
        f.write(head)
        for _ in range(267):
            f.write(chunk)
        f.write('"}]}\n')
        f.write(json.dumps({"messages": webdancer_messages()}) + "\n")
    size = path.stat().st_size - len(json.dumps({"messages": webdancer_messages()})) - 2
    assert size > 200_000_000
    summary = inspect_files([path], qwen_tokenizer)
    assert summary["records"] == 1 and summary["assistant_turns"] == 3
    assert summary["bad_lines"] == [
        f"{path}:1: a line of {size:,} bytes, over the limit of {MAX_LINE_BYTES:,} (max_line_bytes)"
    ]
