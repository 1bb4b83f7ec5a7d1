"""The grain pipeline: deterministic packed batches, exact resume from saved state, host sharding, mesh placement."""

import dataclasses
import json
import re

import jax
import numpy as np
import pytest
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from jaxseeker.data import BadLineError, DataConfig, batch_iterator, open_source, place_on_mesh, tokenize_chat
from jaxseeker.data.chat import token_roles
from jaxseeker.data.pipeline import tokenized_dataset
from jaxseeker.data.records import Trajectory, parse_record
from jaxseeker.data.tokenizer import train_tokenizer
from jaxseeker.errors import InputError

from .samples import make_records, sentences

CONFIG = DataConfig(seq_len=256, batch_size=4, seed=3, num_threads=2)


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    path = tmp_path_factory.mktemp("pipe") / "train.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in make_records(24)))
    return open_source(path)


def _take(iterator, n):
    return [next(iterator) for _ in range(n)]


def _same(a, b):
    return all(x.keys() == y.keys() and all(np.array_equal(x[k], y[k]) for k in x) for x, y in zip(a, b))


def test_batches_have_fixed_shapes_and_hold_every_record(source, qwen_tokenizer):
    config = DataConfig(seq_len=256, batch_size=1, shuffle=False, num_epochs=1)
    batches = list(batch_iterator(source, qwen_tokenizer, config, process_index=0, process_count=1))
    for batch in batches:
        for key in ("tokens", "targets", "loss_mask", "segment_ids", "positions"):
            assert batch[key].shape == (1, 256) and batch[key].dtype == np.int32
    expected = [tokenize_chat(r.messages, qwen_tokenizer) for r in source]
    segments = [b["tokens"][0][b["segment_ids"][0] == s] for b in batches for s in np.unique(b["segment_ids"][0]) if s]
    assert [s.tolist() for s in segments] == [ids[:-1].tolist() for ids, _ in expected]  # in file order
    assert sum(int(b["loss_mask"].sum()) for b in batches) == sum(int(m[1:].sum()) for _, m in expected)


def test_same_seed_same_batches_other_seed_other_order(source, qwen_tokenizer):
    a = _take(batch_iterator(source, qwen_tokenizer, CONFIG, process_index=0, process_count=1), 4)
    b = _take(batch_iterator(source, qwen_tokenizer, CONFIG, process_index=0, process_count=1), 4)
    other = DataConfig(**{**CONFIG.__dict__, "seed": 4})
    c = _take(batch_iterator(source, qwen_tokenizer, other, process_index=0, process_count=1), 4)
    assert _same(a, b)
    assert not _same(a, c)


def test_resumed_iterator_sees_exactly_the_same_next_batches(source, qwen_tokenizer):
    # 24 records over 4 rows per batch: 10 batches run into the second (reshuffled) epoch.
    run = batch_iterator(source, qwen_tokenizer, CONFIG, process_index=0, process_count=1)
    _take(run, 5)
    state = json.loads(json.dumps(run.get_state()))  # checkpoints store it as JSON
    expected = _take(run, 5)

    resumed = batch_iterator(source, qwen_tokenizer, CONFIG, process_index=0, process_count=1)
    resumed.set_state(state)
    assert _same(_take(resumed, 5), expected)


def test_processes_read_disjoint_shards(source, qwen_tokenizer):
    config = DataConfig(seq_len=256, batch_size=4, num_epochs=1)

    def first_tokens(index):
        ds = tokenized_dataset(source, qwen_tokenizer, config, process_index=index, process_count=2)
        return sorted(tuple(ex["tokens"][:40].tolist()) for ex in ds)

    shard0, shard1 = first_tokens(0), first_tokens(1)
    everything = first_tokens(0) + first_tokens(1)
    assert len(shard0) == len(shard1) == 12
    assert not set(shard0) & set(shard1)
    single = tokenized_dataset(source, qwen_tokenizer, config, process_index=0, process_count=1)
    assert sorted(everything) == sorted(tuple(ex["tokens"][:40].tolist()) for ex in single)


def test_drop_policy_in_the_pipeline_is_counted(source, qwen_tokenizer):
    lengths = [len(tokenize_chat(r.messages, qwen_tokenizer)[0]) - 1 for r in source]
    seq_len = int(np.median(lengths))
    config = DataConfig(seq_len=seq_len, batch_size=1, shuffle=False, num_epochs=1, over_length="drop")
    batches = list(batch_iterator(source, qwen_tokenizer, config, process_index=0, process_count=1))
    too_long = [n > seq_len for n in lengths]
    last_kept = max(i for i, t in enumerate(too_long) if not t)
    assert sum(int(b["num_dropped"].sum()) for b in batches) == sum(too_long[:last_kept])


def test_place_on_mesh_makes_global_arrays(source, qwen_tokenizer):
    devices = np.array(jax.devices())
    config = DataConfig(seq_len=256, batch_size=8, seed=0)
    batch = next(batch_iterator(source, qwen_tokenizer, config, process_index=0, process_count=1))
    sharding = NamedSharding(Mesh(devices, ("data",)), PartitionSpec("data", None))
    placed = place_on_mesh(batch, sharding)
    assert sorted(placed) == ["loss_mask", "positions", "segment_ids", "targets", "tokens"]
    for key, array in placed.items():
        assert array.shape == (8, 256) and array.sharding == sharding
        np.testing.assert_array_equal(np.asarray(array), batch[key])
    with pytest.raises(KeyError, match="lacks"):
        place_on_mesh({"tokens": batch["tokens"]}, sharding)


def test_bad_lines_fail_the_pipeline_unless_skipped(write_jsonl):
    path = write_jsonl("bad.jsonl", [make_records(1)[0], "{broken"])
    with pytest.raises(BadLineError, match=r"bad\.jsonl:2: invalid JSON"):
        open_source(path)
    assert len(open_source(path, skip_bad_lines=True)) == 1


# Records read_trajectories never returns, but an ArrayRecord dataset an older version built or a caller can pass.
UNKNOWN_ROLE = Trajectory(
    ({"role": "robot", "content": "Hi"}, {"role": "assistant", "content": "Hello"}), source="old.jsonl:2"
)
CONTENT_DICT = Trajectory(
    ({"role": "user", "content": {"text": "Hi"}}, {"role": "assistant", "content": "Hello"}), source="old.jsonl:5"
)


def test_records_that_cannot_be_tokenized_are_named_once_and_counted_when_skipped(source, qwen_tokenizer, capsys):
    config = DataConfig(seq_len=256, batch_size=1, shuffle=False, num_epochs=2, skip_bad_lines=True)
    mixed = [source[0], UNKNOWN_ROLE, source[1], CONTENT_DICT, source[2]]
    batches = list(batch_iterator(mixed, qwen_tokenizer, config, process_index=0, process_count=1))
    good_only = list(batch_iterator(source[:3], qwen_tokenizer, config, process_index=0, process_count=1))
    assert len(batches) == len(good_only) and _same(batches, good_only)
    assert capsys.readouterr().err.splitlines() == [  # each named the first epoch only
        (
            "skipped 1 record(s) that cannot be tokenized so far, the latest: old.jsonl:2: messages[0]: "
            "role 'robot' is not one of ['system', 'user', 'assistant', 'tool']"
        ),
        (
            "skipped 2 record(s) that cannot be tokenized so far, the latest: old.jsonl:5: messages[0]: "
            "content must be a string or a list of text parts, got dict"
        ),
    ]


@pytest.mark.parametrize("relabel", [{}, {"permute_digits": True}], ids=["as_is", "permute_digits"])
def test_a_record_that_cannot_be_tokenized_fails_the_run_naming_its_line(source, qwen_tokenizer, relabel):
    config = DataConfig(seq_len=256, batch_size=1, shuffle=False, num_epochs=1, num_threads=0, **relabel)
    with pytest.raises(
        InputError,
        match=r"^old\.jsonl:5: messages\[0\]: content must be a string .* \(set "
        r"data\.skip_bad_lines to skip such records\)",
    ):
        list(batch_iterator([source[0], CONTENT_DICT], qwen_tokenizer, config, process_index=0, process_count=1))


def test_a_tool_call_the_chat_template_cannot_render_is_named(write_jsonl, capsys):
    template = (
        "{%- for m in messages %}{%- if '<tool_call>' in m['content'] %}"
        "{{- raise_exception('this template renders no tool call') }}{%- endif %}"
        "{{- '<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n' }}{%- endfor %}"
        "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
    )
    tokenizer = train_tokenizer(sentences(50), 400, chat_template=template)
    answer = {"messages": [{"role": "user", "content": "Where is Lyon?"}, {"role": "assistant", "content": "France"}]}
    call = {
        "messages": [
            {"role": "user", "content": "Where is Lyon?"},
            {"role": "assistant", "content": '<tool_call>{"name": "search"}</tool_call>'},
        ]
    }
    path = write_jsonl("calls.jsonl", [answer, call])
    config = DataConfig(seq_len=64, batch_size=1, shuffle=False, num_epochs=1, num_threads=0)
    with pytest.raises(
        InputError,
        match=rf"^{re.escape(path)}:2: the chat template cannot render these messages: "
        "this template renders no tool call",
    ):
        list(batch_iterator(open_source(path), tokenizer, config, process_index=0, process_count=1))
    skipping = dataclasses.replace(config, skip_bad_lines=True)
    [batch] = list(batch_iterator(open_source(path), tokenizer, skipping, process_index=0, process_count=1))
    assert tokenizer.decode(batch["tokens"][0][batch["segment_ids"][0] == 1]).startswith("<|im_start|>user\nWhere")
    assert capsys.readouterr().err == (
        f"skipped 1 record(s) that cannot be tokenized so far, the latest: {path}:2: the chat template cannot render "
        "these messages: this template renders no tool call\n"
    )


def test_config_errors_name_the_key_and_allowed_values():
    with pytest.raises(ValueError, match=r"data.over_length='pad'.*\['drop', 'truncate'\]"):
        DataConfig(over_length="pad")
    with pytest.raises(ValueError, match=r"unknown data config key\(s\) \['seqlen'\].*seq_len"):
        DataConfig.from_dict({"seqlen": 5})
    with pytest.raises(ValueError, match="divide evenly over 3 processes"):
        batch_iterator([], None, DataConfig(batch_size=4), process_index=0, process_count=3)


def test_context_weight_trains_the_other_tokens_at_that_weight(source, qwen_tokenizer):
    config = DataConfig(seq_len=256, batch_size=1, shuffle=False, num_epochs=1, context_weight=0.25)
    batches = list(batch_iterator(source, qwen_tokenizer, config, process_index=0, process_count=1))
    expected = [tokenize_chat(r.messages, qwen_tokenizer)[1][1:] for r in source]  # targets' 0/1 masks
    weights = [
        b["loss_mask"][0][b["segment_ids"][0] == s] for b in batches for s in np.unique(b["segment_ids"][0]) if s
    ]
    assert all(b["loss_mask"].dtype == np.float32 for b in batches)
    for w, m in zip(weights, expected, strict=True):
        np.testing.assert_array_equal(w, np.where(m > 0, 1.0, 0.25))
    assert all((b["loss_mask"][b["segment_ids"] == 0] == 0).all() for b in batches)  # padding stays untrained
    with pytest.raises(ValueError, match=r"data.context_weight=1.5 must be in \[0, 1\]"):
        DataConfig(context_weight=1.5)


def test_a_weight_0_turn_gets_no_loss_even_with_context_weight(qwen_tokenizer):
    slip = '<tool_call>{"name": "search", "arguments": {"query": "Lyons"}}</tool_call>'
    messages = [
        {"role": "user", "content": "Where is Lyon?"},
        {"role": "assistant", "content": slip, "weight": 0},
        {"role": "user", "content": "<tool_response>\nNo results for 'Lyons'.\n</tool_response>"},
        {"role": "assistant", "content": "<answer>France</answer>"},
    ]
    record = parse_record({"messages": messages})
    config = DataConfig(seq_len=128, batch_size=1, shuffle=False, num_epochs=1, context_weight=0.25)
    [batch] = list(batch_iterator([record], qwen_tokenizer, config, process_index=0, process_count=1))
    ids, roles = token_roles(record.messages, qwen_tokenizer)
    weights = batch["loss_mask"][0][batch["segment_ids"][0] == 1]  # [tokens - 1], for targets ids[1:]
    np.testing.assert_array_equal(weights, np.select([roles[1:] == 1, roles[1:] == 2], [1.0, 0.0], 0.25))
    assert (roles == 2).sum() > 10 and (weights == 0).sum() == (roles[1:] == 2).sum()


def test_permute_digits_relabels_each_draw_and_replays_on_resume(tmp_path, qwen_tokenizer):
    path = tmp_path / "numbers.jsonl"
    record = {
        "messages": [
            {"role": "user", "content": "What is 12,345?"},
            {"role": "assistant", "content": "<answer>12345</answer>"},
        ]
    }
    path.write_text(json.dumps(record) + "\n")
    config = DataConfig(seq_len=64, batch_size=1, num_threads=0, permute_digits=True)
    source = open_source(path)
    draws = [
        qwen_tokenizer.decode(e["tokens"][e["tokens"] != 0])
        for e in tokenized_dataset(source, qwen_tokenizer, config)[:6]
    ]
    answers = [re.search(r"<answer>(\d+)</answer>", d).group(1) for d in draws]
    assert len(set(answers)) > 1 and "12345" not in answers[1:]  # a fresh permutation per epoch
    for text, answer in zip(draws, answers):
        assert f"What is {answer[:2]},{answer[2:]}?" in text  # the same permutation throughout the record
    again = [
        qwen_tokenizer.decode(e["tokens"][e["tokens"] != 0])
        for e in tokenized_dataset(source, qwen_tokenizer, config)[:6]
    ]
    assert again == draws


def test_name_pool_renames_each_draw_and_replays_on_resume(tmp_path, qwen_tokenizer):
    path, pool = tmp_path / "names.jsonl", tmp_path / "pool.tsv"
    call = '<tool_call>{"name": "search", "arguments": {"query": ["Larimore"]}}</tool_call>'
    record = {
        "messages": [
            {"role": "user", "content": "Where is Larimore?"},
            {"role": "assistant", "content": call},
            {"role": "user", "content": "<tool_response>Larimore lies in Ohio.</tool_response>"},
            {"role": "assistant", "content": "<answer>Ohio</answer>"},
        ]
    }
    path.write_text(json.dumps(record) + "\n")
    pool.write_text("".join(f"city\t{name}\n" for name in ("Larimore", "Zell", "Nice", "Bath", "Metz", "Ulm")))
    config = DataConfig(seq_len=96, batch_size=1, num_threads=0, name_pool=str(pool))
    source = open_source(path)

    def draws():
        return [
            qwen_tokenizer.decode(e["tokens"][e["tokens"] != 0])
            for e in tokenized_dataset(source, qwen_tokenizer, config)[:8]
        ]

    texts = draws()
    names = [re.search(r"Where is (\w+)\?", t).group(1) for t in texts]
    assert "Larimore" not in names and len(set(names)) > 1  # a fresh name per epoch
    for text, name in zip(texts, names):
        assert f'"query": ["{name}"]' in text and f"{name} lies in Ohio." in text
    assert draws() == texts


def test_copy_rate_mixes_copy_examples_into_the_rows_and_replays_on_resume(source, qwen_tokenizer):
    config = DataConfig(
        seq_len=512, batch_size=2, seed=1, num_threads=0, context_weight=0.25, copy_rate=0.5, copy_gap=20
    )
    trajectories = {tuple(tokenize_chat(r.messages, qwen_tokenizer)[0][:-1].tolist()) for r in source}
    run = batch_iterator(source, qwen_tokenizer, config, process_index=0, process_count=1)
    batches = _take(run, 6)
    kinds = []
    for b in batches:
        for row in range(2):
            for s in set(b["segment_ids"][row].tolist()) - {0}:
                tokens = b["tokens"][row][b["segment_ids"][row] == s]
                weights = b["loss_mask"][row][b["segment_ids"][row] == s]
                if tuple(tokens.tolist()) in trajectories:
                    kinds.append("trajectory")
                    continue
                start = int(np.nonzero(weights)[0][0])  # the copy's first token: its successor is the first target
                size = len(tokens) + 1 - start  # the run's length (shifted: the segment lacks the copy's last token)
                np.testing.assert_array_equal(tokens[start:], tokens[: size - 1])
                assert set(weights.tolist()) <= {0.0, 1.0} and size >= 4 and 0 <= start - size <= 20
                kinds.append("copy")
    assert 0.3 < kinds.count("copy") / len(kinds) < 0.7 and "trajectory" in kinds
    state = json.loads(json.dumps(run.get_state()))
    expected = _take(run, 3)
    resumed = batch_iterator(source, qwen_tokenizer, config, process_index=0, process_count=1)
    resumed.set_state(state)
    assert _same(_take(resumed, 3), expected)
    with pytest.raises(ValueError, match=r"data.copy_rate=1.0 must be in \[0, 1\)"):
        DataConfig(copy_rate=1.0)
