"""The accelerators a plan can target: memory and dense bf16 peak of each (no jax, so commands list them quickly)."""

import dataclasses

GiB = 2**30
USABLE_HBM = 0.9  # share of a chip's memory a plan may fill (XLA and the runtime keep the rest)


@dataclasses.dataclass(frozen=True)
class Chip:
    """One accelerator: memory and dense bf16 matmul peak."""

    name: str
    hbm_bytes: int
    peak_flops: float


CHIPS = {
    "v4": Chip("TPU v4", 32 * GiB, 275e12),
    "v5e": Chip("TPU v5e", 16 * GiB, 197e12),
    "v5p": Chip("TPU v5p", 95 * GiB, 459e12),
    "v6e": Chip("TPU v6e", 32 * GiB, 918e12),
    "h100": Chip("NVIDIA H100 SXM", 80 * GiB, 989e12),
    "h200": Chip("NVIDIA H200 SXM", 140 * GiB, 989e12),
}
