"""The transformers + PyTorch side of `jaxseeker bench sft` (`bench.run_bench`): one pass of padded SFT of the same
model shape on the same trajectories, as HF's data collator and Trainer would run it, full or with PEFT's LoRA."""

from __future__ import annotations

import importlib.util
import time

import numpy as np

from jaxseeker import model


def bench_hf(
    examples: list[tuple[np.ndarray, np.ndarray]],
    cfg: model.ModelConfig,
    *,
    batch: int,
    max_len: int,
    lora: model.LoraConfig | None = None,
) -> dict:
    """One pass of padded SFT with transformers + PyTorch AdamW: useful tokens/s and time per step. With `lora`,
    PEFT's LoRA adapters of the same rank, alpha and targets are trained instead of the weights."""
    import torch
    import transformers

    torch.manual_seed(0)
    hf_config = {k: v for k, v in model.to_hf_dict(cfg).items() if k not in ("architectures", "model_type")}
    hf = transformers.AutoModelForCausalLM.from_config(
        transformers.AutoConfig.for_model(cfg.model_type, **hf_config),
        attn_implementation="sdpa",
    ).train()
    if lora is not None:
        import peft

        hf = peft.get_peft_model(
            hf,
            peft.LoraConfig(
                r=lora.rank,
                lora_alpha=lora.alpha,
                lora_dropout=0.0,
                task_type="CAUSAL_LM",
                target_modules=[model.lora.HF_MODULES[t] for t in lora.targets],
            ),
        )
    trained = [p for p in hf.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(trained, lr=1e-4)
    order = list(range(len(examples)))
    batches = [order[i : i + batch] for i in range(0, len(order) - batch + 1, batch)]

    def run(idx):
        longest = min(max(len(examples[i][0]) for i in idx), max_len)
        ids = torch.zeros((len(idx), longest), dtype=torch.long)
        labels = torch.full((len(idx), longest), -100, dtype=torch.long)
        attn = torch.zeros((len(idx), longest), dtype=torch.long)
        for r, i in enumerate(idx):
            x, m = examples[i][0][:longest], examples[i][1][:longest]
            ids[r, : len(x)] = torch.from_numpy(x.astype(np.int64))
            labels[r, : len(x)] = torch.where(
                torch.from_numpy(m.astype(bool)), torch.from_numpy(x.astype(np.int64)), -100
            )
            attn[r, : len(x)] = 1
        loss = hf(input_ids=ids, attention_mask=attn, labels=labels).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(trained, 1.0)
        opt.step()
        opt.zero_grad()
        return int((labels[:, 1:] != -100).sum())

    run(batches[0])
    t = time.perf_counter()
    useful = sum(run(b) for b in batches[1:])
    wall = time.perf_counter() - t
    return {"useful_tok_s": useful / wall, "step_s": wall / (len(batches) - 1), "steps": len(batches) - 1}


def peft_installed() -> bool:
    """Whether the `peft` package can be imported (the HF side of the LoRA rows)."""
    return importlib.util.find_spec("peft") is not None
