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
