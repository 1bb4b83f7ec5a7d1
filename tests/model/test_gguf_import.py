"""`model.import_gguf` and `jaxseeker import-gguf`: a GGUF file as an HF directory that transformers and
`load_hf` load, with the weights `load_gguf` reads and the tokenizer and chat template transformers converts."""

import json

import jax
import numpy as np
import pytest
import torch
import transformers
from gguf_support import CHATML, hf_config, hf_state, write_gguf

from jaxseeker import model
from jaxseeker.cli import main
from jaxseeker.data.tokenizer import load_tokenizer

CHAT = [{"role": "user", "content": "the capital is? <|im_end|> he is"}]


@pytest.fixture(scope="module", params=["llama", "qwen2"])
def imported(request, tmp_path_factory):
    """(GGUF file with eos <|endoftext|> and a chatml template, the HF directory `import_gguf` wrote from it)."""
    root = tmp_path_factory.mktemp(request.param)
    config = hf_config(request.param)
    gguf_file = write_gguf(root / "tiny.gguf", hf_state(config), config, arch=request.param, eos=0)
    return gguf_file, model.import_gguf(gguf_file, root / "hf")


def test_load_hf_of_the_import_is_load_gguf(imported):
    gguf_file, hf_dir = imported
    cfg, params = model.load_gguf(gguf_file)
    hf_cfg, hf_params = model.load_hf(hf_dir)
    assert hf_cfg == cfg
    for ours, theirs in zip(jax.tree.leaves(params), jax.tree.leaves(hf_params)):
        np.testing.assert_array_equal(np.asarray(ours), np.asarray(theirs))


def test_transformers_loads_the_import_as_it_loads_the_gguf(imported):
    gguf_file, hf_dir = imported
    from_dir = transformers.AutoModelForCausalLM.from_pretrained(hf_dir)
    from_gguf = transformers.AutoModelForCausalLM.from_pretrained(
        gguf_file.parent, gguf_file=gguf_file.name, dtype=torch.float32
    )
    ids = torch.tensor(np.random.default_rng(0).integers(0, from_dir.config.vocab_size, (1, 16)))
    with torch.no_grad():
        a, b = from_dir(input_ids=ids).logits, from_gguf(input_ids=ids).logits
    assert a.abs().max() > 0.5 and torch.equal(a, b)  # the same float32 weights through the same code


def test_the_tokenizer_comes_with_its_chat_template_and_ends_turns_on_im_end(imported):
    gguf_file, hf_dir = imported
    saved = json.loads((hf_dir / "tokenizer_config.json").read_text())
    assert saved["chat_template"] == CHATML and saved["eos_token"] == "<|im_end|>"  # the file's eos: <|endoftext|>
    assert json.loads((hf_dir / "config.json").read_text())["eos_token_id"] == [2, 0]
    ours = load_tokenizer(hf_dir)  # the project's loader, offline
    theirs = transformers.AutoTokenizer.from_pretrained(gguf_file.parent, gguf_file=gguf_file.name)
    prompt = ours.apply_chat_template(CHAT, tokenize=False, add_generation_prompt=True)
    assert prompt == theirs.apply_chat_template(CHAT, tokenize=False, add_generation_prompt=True)
    assert prompt.startswith("<|im_start|>user\n") and prompt.endswith("<|im_start|>assistant\n")
    ids = ours(prompt).input_ids
    assert ids == theirs(prompt).input_ids and ids[0] == 1 and ids.count(2) == 2  # special tokens kept whole
    assert ours.decode(ids) == prompt
    assert ours(" the cap").input_ids == ours.convert_tokens_to_ids(["Ġthe", "Ġcap"])  # the file's merges


def test_import_gguf_command_writes_an_hf_directory(imported, tmp_path, capsys):
    gguf_file, _ = imported
    assert main(["import-gguf", str(gguf_file), "--out", str(tmp_path / "out"), "--dtype", "bfloat16"]) == 0
    line = capsys.readouterr().out.strip()
    assert line.startswith(f"imported {gguf_file} (") and f"into {tmp_path / 'out'} as bfloat16 in " in line
    cfg, params = model.load_hf(tmp_path / "out")
    assert cfg.hf_dtype == "bfloat16" and (tmp_path / "out" / "tokenizer.json").is_file()


def test_import_gguf_command_names_a_bad_file_in_one_line(tmp_path):
    text = tmp_path / "notes.txt"
    text.write_text("not a model\n")
    with pytest.raises(SystemExit, match=f"^jaxseeker import-gguf: {text}: not a GGUF file"):
        main(["import-gguf", str(text), "--out", str(tmp_path / "out")])
    with pytest.raises(SystemExit, match=f"^jaxseeker import-gguf: GGUF file not found: {tmp_path / 'none.gguf'}$"):
        main(["import-gguf", str(tmp_path / "none.gguf"), "--out", str(tmp_path / "out")])
    assert not (tmp_path / "out").exists()


def test_a_gguf_without_a_tokenizer_is_named(tmp_path):
    config = hf_config("llama")
    path = write_gguf(tmp_path / "bare.gguf", hf_state(config), config, tokenizer=False)
    with pytest.raises(model.GGUFError, match=rf"^{path}: no tokenizer \(tokenizer.ggml.model\) in this GGUF"):
        model.import_gguf(path, tmp_path / "out")
