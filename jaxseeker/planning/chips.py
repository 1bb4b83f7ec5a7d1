"""The accelerators a plan can target: memory, dense bf16 peak and chips per host of each (no jax, so commands list
them quickly). TPU hosts of multi-host slices drive 4 chips (v4, v5p, and v5e / v6e slices beyond one host)."""

import dataclasses

GiB = 2**30
USABLE_HBM = 0.9  # share of a chip's memory a plan may fill (XLA and the runtime keep the rest)


@dataclasses.dataclass(frozen=True)
class Chip:
    """One accelerator: memory, dense bf16 matmul peak, and how many a host of a multi-host slice drives (one
    process each; the rollout engine's replicas stay within a host)."""

    name: str
    hbm_bytes: int
    peak_flops: float
    per_host: int = 4


CHIPS = {
    "v4": Chip("TPU v4", 32 * GiB, 275e12),
    "v5e": Chip("TPU v5e", 16 * GiB, 197e12),
    "v5p": Chip("TPU v5p", 95 * GiB, 459e12),
    "v6e": Chip("TPU v6e", 32 * GiB, 918e12),
    "h100": Chip("NVIDIA H100 SXM", 80 * GiB, 989e12, per_host=8),
    "h200": Chip("NVIDIA H200 SXM", 140 * GiB, 989e12, per_host=8),
}
