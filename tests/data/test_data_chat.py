"""Rendering and loss masks: mask 1 exactly on assistant content + <|im_end|>, same ids as inference."""

import numpy as np
import pytest

from jaxseeker.data import render_chat, render_generation_prompt, tokenize_chat, train_tokenizer

from .samples import ASSISTANT_1, ASSISTANT_2, ASSISTANT_3, openseeker_messages, sentences, webdancer_messages


def _encode(tokenizer, text):
    return tokenizer(text, add_special_tokens=False)["input_ids"]


def _runs(mask):
    """[start, end) of every run of ones."""
    edges = np.diff(np.concatenate([[0], mask, [0]]))
    return list(zip(np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)))


@pytest.mark.parametrize("style", [webdancer_messages, openseeker_messages])
def test_mask_is_exactly_the_assistant_turns(tokenizer, style):
    ids, mask = tokenize_chat(style(), tokenizer)
    assert ids.dtype == np.int32 and mask.dtype == np.int32 and ids.shape == mask.shape

    im_end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    header = _encode(tokenizer, "<|im_start|>assistant\n")
    runs = _runs(mask)
    assert len(runs) == 3
    for (start, end), content in zip(runs, (ASSISTANT_1, ASSISTANT_2, ASSISTANT_3)):
        assert ids[start:end].tolist() == _encode(tokenizer, content) + [im_end]
        assert ids[start - len(header) : start].tolist() == header  # the header is context, not trained
        assert mask[end] == 0 and tokenizer.decode(ids[end : end + 1]) == "\n"
    assert mask.sum() == sum(len(_encode(tokenizer, c)) + 1 for c in (ASSISTANT_1, ASSISTANT_2, ASSISTANT_3))


@pytest.mark.parametrize("style", [webdancer_messages, openseeker_messages])
def test_ids_equal_tokenizing_the_full_rendering(tokenizer, style):
    ids, _ = tokenize_chat(style(), tokenizer)
    assert ids.tolist() == _encode(tokenizer, render_chat(style(), tokenizer))


def test_both_observation_styles_render_the_same(tokenizer):
    assert render_chat(webdancer_messages(), tokenizer) == render_chat(openseeker_messages(), tokenizer)


def test_canonical_form_matches_the_qwen_template_on_raw_tool_messages(qwen_tokenizer):
    raw = qwen_tokenizer.apply_chat_template(openseeker_messages(), tokenize=False)
    assert render_chat(openseeker_messages(), qwen_tokenizer) == raw


def test_template_variants_differ_only_where_expected(tokenizer_dirs):
    from jaxseeker.data import load_tokenizer

    messages = webdancer_messages()[1:]  # no system message: the Qwen template adds its default one
    qwen = render_chat(messages, load_tokenizer(tokenizer_dirs["qwen"]))
    chatml = render_chat(messages, load_tokenizer(tokenizer_dirs["chatml"]))
    default_system = "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
    assert qwen == default_system + chatml
    assert chatml == render_chat(messages)  # no tokenizer: built-in chatml
    assert chatml.startswith("<|im_start|>user\nWhich city")


@pytest.mark.parametrize("style", [webdancer_messages, openseeker_messages])
def test_inference_prompt_plus_generated_turn_equals_training_ids(tokenizer, style):
    messages = style()
    full_ids, _ = tokenize_chat(messages, tokenizer)
    im_end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    for i, message in enumerate(messages):
        if message["role"] != "assistant":
            continue
        prompt = render_generation_prompt(messages[:i], tokenizer)
        assert prompt.dtype == np.int32
        assert tokenizer.decode(prompt).endswith("<|im_start|>assistant\n")
        generated = _encode(tokenizer, message["content"]) + [im_end]
        turn = prompt.tolist() + generated
        assert full_ids[: len(turn)].tolist() == turn


def test_prompt_completion_style_and_user_only_turns(tokenizer):
    messages = [{"role": "user", "content": "Capital?"}, {"role": "assistant", "content": "<answer>Paris</answer>"}]
    ids, mask = tokenize_chat(messages, tokenizer)
    assert tokenizer.decode(ids[mask == 1]) == "<answer>Paris</answer><|im_end|>"


def test_a_token_straddling_the_turn_edge_is_an_error():
    no_newline = (
        "{%- for m in messages %}{{- '<|im_start|>' + m['role'] + m['content'] + '<|im_end|>\\n' }}{%- endfor %}"
        "{%- if add_generation_prompt %}{{- '<|im_start|>assistant' }}{%- endif %}"
    )
    tok = train_tokenizer(sentences(50) + ["assistantParis"] * 20, 400, chat_template=no_newline)
    messages = [{"role": "user", "content": "Capital?"}, {"role": "assistant", "content": "Paris"}]
    with pytest.raises(ValueError, match="straddles"):
        tokenize_chat(messages, tok)


def test_a_template_that_rewrites_history_is_an_error():
    counting = (
        "{{- '<|im_start|>system\\n' + (messages|length|string) + ' messages<|im_end|>\\n' }}"
        "{%- for m in messages %}"
        "{{- '<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n' }}"
        "{%- endfor %}"
        "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
    )
    tok = train_tokenizer(sentences(50), 400, chat_template=counting)
    with pytest.raises(ValueError, match="prefix-stable"):
        tokenize_chat(webdancer_messages()[1:], tok)


def test_an_error_the_template_raises_is_a_value_error_that_says_so():
    no_tool_calls = (
        "{%- for m in messages %}{%- if '<tool_call>' in m['content'] %}"
        "{{- raise_exception('this template renders no tool call') }}{%- endif %}"
        "{{- '<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n' }}{%- endfor %}"
    )
    tok = train_tokenizer(sentences(50), 400, chat_template=no_tool_calls)
    with pytest.raises(
        ValueError, match="^the chat template cannot render these messages: this template renders no tool call$"
    ):
        tokenize_chat(webdancer_messages(), tok)


def test_an_assistant_turn_with_weight_0_is_context_not_loss(tokenizer):
    weighted = webdancer_messages()
    second = next(i for i, m in enumerate(weighted) if m["role"] == "assistant" and m["content"] == ASSISTANT_2)
    weighted[second] = {**weighted[second], "weight": 0}
    ids, mask = tokenize_chat(weighted, tokenizer)
    plain_ids, plain_mask = tokenize_chat(webdancer_messages(), tokenizer)
    assert ids.tolist() == plain_ids.tolist()  # the turn is still in the context
    runs = _runs(mask)
    assert len(runs) == 2 and runs == [r for i, r in enumerate(_runs(plain_mask)) if i != 1]
    assert mask.sum() == plain_mask.sum() - len(_encode(tokenizer, ASSISTANT_2)) - 1


# ---- long conversations: the work is linear in the turns ------------------------------------------------------


def _conversation(turns: int) -> list[dict]:
    """A question, `turns` tool calls each answered by an observation, and a final answer."""
    messages = [{"role": "user", "content": "Which city on the river was founded first?"}]
    for i in range(turns):
        messages.append({"role": "assistant", "content": f'<tool_call>{{"name": "search", "q": "{i}"}}</tool_call>'})
        messages.append({"role": "user", "content": f"<tool_response>\nResult {i}: Lyon.\n</tool_response>"})
    return messages + [{"role": "assistant", "content": "<answer>Lyon</answer>"}]


def _count_rendered_messages(monkeypatch, tokenizer, budget: int) -> dict:
    """Counts the messages every rendering (built-in chatml or the tokenizer's template) is given; a rendering past
    `budget` messages in all fails at once, so a quadratic rendering fails fast instead of running for minutes."""
    from jaxseeker.data import chat

    counted = {"messages": 0}

    def counting(render):
        def counted_render(messages, *args, **kwargs):
            counted["messages"] += len(messages)
            assert counted["messages"] <= budget, f"rendered more than {budget} messages"
            return render(messages, *args, **kwargs)

        return counted_render

    monkeypatch.setattr(chat, "_chatml", counting(chat._chatml))
    monkeypatch.setattr(tokenizer, "apply_chat_template", counting(tokenizer.apply_chat_template))
    return counted


def test_4000_turns_render_each_message_a_few_times_not_once_per_turn(tokenizer, monkeypatch):
    work = {}
    for turns in (1000, 4000):
        messages = _conversation(turns)
        with monkeypatch.context() as patch:
            counted = _count_rendered_messages(patch, tokenizer, budget=6 * len(messages))
            ids, mask = tokenize_chat(messages, tokenizer)
        work[turns] = counted["messages"]
        assert len(_runs(mask)) == turns + 1  # every assistant turn is trained
    # the full conversation, chatml, the first and the last turn's prefixes: 4 renderings of each message at most
    # (once per turn it was 2 * turns renderings of ~turns messages each: 16 times the work for 4 times the turns)
    assert work[4000] <= 4 * (2 * 4000 + 2)
    assert work[4000] <= 4 * work[1000] + 8


def _reference_spans(messages: list[dict], tokenizer) -> list[tuple[int, int]]:
    """Each assistant turn's span by rendering its prefix, the definition (for messages without tool messages)."""
    spans = []
    for i, message in enumerate(messages):
        if message["role"] == "assistant":
            prompt = render_chat(messages[:i], tokenizer, add_generation_prompt=True)
            upto = render_chat(messages[: i + 1], tokenizer)
            spans.append((len(prompt), upto.rindex("<|im_end|>") + len("<|im_end|>")))
    return spans


def test_the_counted_spans_are_those_of_rendering_each_prefix(tokenizer):
    from jaxseeker.data.chat import assistant_spans

    for messages in (webdancer_messages(), webdancer_messages()[1:], _conversation(30)):
        full, spans = assistant_spans(messages, tokenizer)
        assert full == render_chat(messages, tokenizer)
        assert [span[:2] for span in spans] == _reference_spans(messages, tokenizer)


def test_a_template_that_is_not_chatml_is_checked_turn_by_turn():
    from jaxseeker.data.chat import assistant_spans

    blank_line_between = (  # not chatml: a blank line after every turn
        "{%- for m in messages %}{{- '<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n\\n' }}"
        "{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
    )
    tok = train_tokenizer(sentences(50), 400, chat_template=blank_line_between)
    messages = _conversation(3)
    full, spans = assistant_spans(messages, tok)
    assert [span[:2] for span in spans] == _reference_spans(messages, tok)
    assert full.endswith("<answer>Lyon</answer><|im_end|>\n\n")
    assert [full[start:end] for start, end, _ in spans][-2:] == [
        '<tool_call>{"name": "search", "q": "2"}</tool_call><|im_end|>',
        "<answer>Lyon</answer><|im_end|>",
    ]
