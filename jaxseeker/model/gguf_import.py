"""A GGUF file → a Hugging Face model directory (`import_gguf`): the weights dequantised by `load_gguf` and saved
by `save_hf`, and the tokenizer with its chat template as transformers' own GGUF tokenizer conversion builds it.
"""

from __future__ import annotations

from pathlib import Path

from jaxseeker.model.gguf_io import CHATML_END, GGUFError, load_gguf, metadata, open_gguf
from jaxseeker.model.hf_io import save_hf


def write_tokenizer(path: str | Path, out_dir: str | Path) -> None:
    """Write the GGUF's tokenizer (tokenizer.json, and tokenizer_config.json holding the chat template) to
    `out_dir`. Where the template is chatml, eos is `<|im_end|>`, the token a chat turn ends on."""
    from transformers import AutoTokenizer

    path = Path(path)
    reader = open_gguf(path)
    if metadata(reader, "tokenizer.ggml.model") is None:
        raise GGUFError(f"{path}: no tokenizer (tokenizer.ggml.model) in this GGUF; an HF model directory needs one")
    tokenizer = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name, local_files_only=True)
    template = tokenizer.chat_template if isinstance(tokenizer.chat_template, str) else ""
    if CHATML_END in template and CHATML_END in tokenizer.get_vocab():
        tokenizer.eos_token = CHATML_END
    tokenizer.save_pretrained(str(out_dir), save_jinja_files=False)  # the template inside tokenizer_config.json


def import_gguf(path: str | Path, out_dir: str | Path, dtype: str | None = None) -> Path:
    """Write the GGUF model at `path` as an HF directory (config.json, generation_config.json, safetensors,
    tokenizer) that transformers and `load_hf` load; the weights are dequantised to float32 (or `dtype`)."""
    cfg, params = load_gguf(path, dtype)
    out = save_hf(params, cfg, out_dir)
    write_tokenizer(path, out)
    return out
