"""Train a small byte-level BPE tokenizer and load tokenizers as transformers fast tokenizers.

Byte-level BPE (the model family of the Qwen2 tokenizer) is chosen over a SentencePiece Unigram
model: every byte string is encodable without an unknown token or byte-fallback pieces, character
offsets come for free (the loss mask needs them), and the result is a plain ``tokenizer.json`` that
``transformers.AutoTokenizer`` loads and the HF export copies unchanged. Text is split before BPE
with the Qwen2 pattern, which makes every digit its own token: a number then tokenises the same in a
page, a tool call and an answer, so a small policy can copy it digit by digit. The ``names`` split goes one
step further for words that start with a capital: they never take the character before them (Qwen2 lets a
letter run take one, so ``" Sherwin"`` after a space and ``"Sherwin`` after a JSON quote are different
tokens), so an entity name is the same token sequence in a question, a tool call, a page and an answer.
It costs one token per capitalised word after a space (+9% on the demo's trajectories). The ``numbers`` split
keeps that and cuts numbers into groups of three digits from the right, each group one token (1,110 of the
vocabulary): a small policy copies `430` in one step instead of three, where digit-by-digit copies slip by one.
``drop_thousands_separators`` removes the comma between digit groups in the normalizer (`4,427` reads as
`4427`): a lossy choice, made for a small policy whose quotes of `4,427` broke off at the comma (a token that
also follows every name qualifier such as `(Illinois, US)`), and which answers `4427` in any case.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable
from pathlib import Path

from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
from transformers import AutoTokenizer, PreTrainedTokenizerBase, PreTrainedTokenizerFast

from jaxseeker.errors import InputError

# Qwen2's pre-tokenizer split (tokenizer.json of the Qwen2 / Qwen2.5 / Qwen3 checkpoints): contractions,
# letter runs with at most one leading non-letter, single digits, punctuation runs, newlines, spaces.
QWEN2_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|"
    r"\s+(?!\S)|\s+"
)
# The Qwen2 split, except that only lower-case words take a leading space and no letter run takes another
# character: capitalised words (names) tokenise the same after a space, a quote, a bracket or a tag.
NAMES_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)| ?\p{Ll}\p{L}*|\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|"
    r"\s+(?!\S)|\s+"
)
# The names split, except that a digit run splits into groups of three from the right (`20614` → `20` `614`,
# `4,427` → `4` `,` `427`), each group one token: a number of up to three digits is copied in one step, and the
# groups are the same with or without thousands separators.
NUMBERS_SPLIT = NAMES_SPLIT.replace(r"|\p{N}|", r"|\p{N}{1,3}(?=(?:\p{N}{3})*(?!\p{N}))|")
SPLITS = {"qwen2": QWEN2_SPLIT, "names": NAMES_SPLIT, "numbers": NUMBERS_SPLIT}
THOUSANDS_SEPARATOR = r"(?<=\d),(?=\d{3}(?!\d))"  # the comma of `4,427` and both of `1,234,567`
# Every 1-3 digit group as a word, repeated so that BPE makes each one token (the `numbers` split's 1,110 tokens).
_DIGIT_GROUPS = " ".join(
    [str(d) for d in range(10)] + [f"{d:02d}" for d in range(100)] + [f"{d:03d}" for d in range(1000)]
)
_DIGIT_GROUP_REPEATS = 300

SPECIAL_TOKENS = (
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<think>",
    "</think>",
    "<tool_call>",
    "</tool_call>",
    "<tool_response>",
    "</tool_response>",
    "<answer>",
    "</answer>",
)

# Qwen2.5-style template: a default system prompt, chatml turns, and runs of `tool` messages
# rendered as one user turn of <tool_response> blocks (the bytes `records.normalize_messages` writes).
QWEN_CHAT_TEMPLATE = (
    "{%- if messages[0]['role'] == 'system' %}"
    "{{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}"
    "{%- else %}"
    "{{- '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- for message in messages %}"
    "{%- if message['role'] == 'user' or message['role'] == 'assistant' %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{%- elif message['role'] == 'tool' %}"
    "{%- if loop.first or messages[loop.index0 - 1]['role'] != 'tool' %}{{- '<|im_start|>user' }}{%- endif %}"
    "{{- '\\n<tool_response>\\n' + message['content'] + '\\n</tool_response>' }}"
    "{%- if loop.last or messages[loop.index0 + 1]['role'] != 'tool' %}{{- '<|im_end|>\\n' }}{%- endif %}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)


def train_tokenizer(
    texts: Iterable[str],
    vocab_size: int,
    out_dir: str | Path | None = None,
    *,
    chat_template: bool | str = True,
    split: str = "qwen2",
    drop_thousands_separators: bool = False,
) -> PreTrainedTokenizerFast:
    """Trains a byte-level BPE tokenizer with the agent's special tokens; saves it to ``out_dir`` if given.

    ``split``: the pre-tokenizer pattern, ``"qwen2"`` (Qwen2's), ``"names"`` (capitalised words never take
    a leading character; see the module docstring) or ``"numbers"`` (names, and every digit group of up to three
    from the right is one token). ``drop_thousands_separators``: the normalizer deletes the comma between digit
    groups, so `4,427` in a page and `4427` in an answer are the same tokens (decoding does not restore it).

    ``chat_template``: True for the Qwen-style template, a Jinja string for a custom one, False for
    none (rendering then falls back to built-in chatml). ``eos_token`` is ``<|im_end|>`` (the
    end-of-turn token generation stops on) and ``pad_token`` is ``<|endoftext|>``.
    """
    if split not in SPLITS:
        raise ValueError(f"split must be one of {sorted(SPLITS)}, got {split!r}")
    min_size = 256 + len(SPECIAL_TOKENS) + (len(_DIGIT_GROUPS.split()) if split == "numbers" else 0)
    if vocab_size < min_size:
        raise ValueError(f"vocab_size={vocab_size} must be at least {min_size} (256 bytes + special tokens)")
    core = Tokenizer(models.BPE())
    core.normalizer = normalizers.NFC()
    if drop_thousands_separators:
        core.normalizer = normalizers.Sequence([normalizers.NFC(), normalizers.Replace(Regex(THOUSANDS_SEPARATOR), "")])
    core.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(SPLITS[split]), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    if split == "numbers":
        texts = itertools.chain(texts, itertools.repeat(_DIGIT_GROUPS, _DIGIT_GROUP_REPEATS))
    core.train_from_iterator(texts, trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        additional_special_tokens=list(SPECIAL_TOKENS[1:]),
    )
    if chat_template:
        tokenizer.chat_template = QWEN_CHAT_TEMPLATE if chat_template is True else chat_template
    if out_dir is not None:
        tokenizer.save_pretrained(str(out_dir))
    return tokenizer


# A saved tokenizer's vocabulary: the fast tokenizer's file, a BPE vocabulary or a SentencePiece model.
_VOCABULARY_FILES = ("tokenizer.json", "vocab.json", "tokenizer.model")
# The JSON files of a saved tokenizer (and of the model directory it often shares) that `load_tokenizer` reads.
_TOKENIZER_JSON_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "config.json")


def load_tokenizer(path: str | Path) -> PreTrainedTokenizerBase:
    """Loads a tokenizer directory (``tokenizer.json`` + config, e.g. a Qwen checkpoint) offline; InputError naming
    the directory, or the file and line of a damaged JSON file, when none loads."""
    path = Path(path)
    if not path.is_dir():
        raise FileNotFoundError(f"tokenizer directory not found: {path}")
    if not any((path / name).is_file() for name in _VOCABULARY_FILES):  # transformers 5 would build an empty one
        raise InputError(f"{path}: no tokenizer in this directory (none of {', '.join(_VOCABULARY_FILES)})")
    for name in _TOKENIZER_JSON_FILES:  # transformers' JSONDecodeError names neither the file nor the directory
        file = path / name
        if file.is_file():
            try:
                json.loads(file.read_text(encoding="utf-8"))
            except (UnicodeDecodeError, json.JSONDecodeError) as err:
                where = f":{err.lineno}" if isinstance(err, json.JSONDecodeError) else ""
                raise InputError(f"{file}{where}: not a JSON file ({err})") from None
    try:
        return AutoTokenizer.from_pretrained(str(path), local_files_only=True)
    except (KeyError, OSError, ValueError) as err:  # transformers finds no usable tokenizer files
        reason = (str(err).strip().splitlines() or [""])[0].rstrip(" :")
        raise InputError(
            f"{path}: no tokenizer loads from this directory ({type(err).__name__}: {reason}); it needs the "
            "tokenizer.json and tokenizer_config.json that `save_pretrained` writes"
        ) from None
