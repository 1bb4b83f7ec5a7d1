"""`inspect_files`: counts that match the tokenizer, and every bad line as FILE:LINE: reason."""

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
