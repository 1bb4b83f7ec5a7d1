"""The accelerators a plan can target: memory, dense bf16 peak, memory bandwidth and chips per host of each, and the
machines users rent as targets (`planning.targets` fits a recipe to one). No jax, so commands list them quickly. TPU
hosts of multi-host slices drive 4 chips (v4, v5p, and v5e / v6e slices beyond one host). Peaks and bandwidths are
the vendors' data sheets (Cloud TPU's system architecture pages; NVIDIA's H100 / H200 SXM)."""

import dataclasses

GiB = 2**30
USABLE_HBM = 0.9  # share of a chip's memory a plan may fill (XLA and the runtime keep the rest)
MARGIN = 0.05  # share of the memory a backend reports usable that a plan for a target leaves free
# A host's sustained write of its checkpoint shards to a Cloud Storage bucket or a persistent disk: an assumption
# (1 GB/s), to be replaced by a measured figure (`gcloud storage` / `gsutil perfdiag`, or the seconds orbax logs for
# a save) in the target's `write_bytes_per_s`.
WRITE_BYTES_PER_S = 1e9
NOTICE_S = 30.0  # the notice a spot / preemptible TPU VM or GCE VM gets before it stops (ACPI G2 soft off)


@dataclasses.dataclass(frozen=True)
class Chip:
    """One accelerator: memory, dense bf16 matmul peak, memory bandwidth (bytes/s), and how many a host of a
    multi-host slice drives (one process each; the rollout engine's replicas stay within a host)."""

    name: str
    hbm_bytes: int
    peak_flops: float
    hbm_bandwidth: float
    per_host: int = 4


CHIPS = {
    "v4": Chip("TPU v4", 32 * GiB, 275e12, 1200e9),
    "v5e": Chip("TPU v5e", 16 * GiB, 197e12, 819e9),
    "v5p": Chip("TPU v5p", 95 * GiB, 459e12, 2765e9),
    "v6e": Chip("TPU v6e", 32 * GiB, 918e12, 1638e9),
    "h100": Chip("NVIDIA H100 SXM", 80 * GiB, 989e12, 3.35e12, per_host=8),
    "h200": Chip("NVIDIA H200 SXM", 140 * GiB, 989e12, 4.8e12, per_host=8),
}


@dataclasses.dataclass(frozen=True)
class Target:
    """A machine to plan for: `chips` of `chip` (a `chips.CHIPS` key), `usable_bytes` of memory per chip as the
    backend reports it, per host `host_ram_bytes` of RAM, a `boot_disk_bytes` boot disk and `write_bytes_per_s`
    of sustained checkpoint writes, and the `notice_s` a preemption gives (`planning.preemption`)."""

    name: str
    chip: str
    chips: int
    usable_bytes: int
    host_ram_bytes: int
    boot_disk_bytes: int
    backend: str  # "tpu" | "gpu"
    write_bytes_per_s: float = WRITE_BYTES_PER_S
    notice_s: float = NOTICE_S

    @property
    def per_host(self) -> int:
        """Chips a host drives."""
        return min(CHIPS[self.chip].per_host, self.chips)

    @property
    def hosts(self) -> int:
        """Hosts of the slice or node."""
        return self.chips // self.per_host

    def budget(self, margin: float = MARGIN) -> float:
        """Bytes a plan may fill per chip: the usable memory less `margin`."""
        return (1 - margin) * self.usable_bytes


TARGETS = {
    # v5p-128: 128 TensorCores = 64 chips on 16 hosts (ct5p-hightpu-4t: 448 GiB RAM); TPU VMs boot from 100 GiB
    "v5p-128": Target("v5p-128", "v5p", 64, int(95.74 * GiB), 448 * GiB, 100 * GiB, "tpu"),
    # v6e-64: 64 chips on 16 hosts (ct6e-standard-4t: 720 GiB RAM)
    "v6e-64": Target("v6e-64", "v6e", 64, int(31.25 * GiB), 720 * GiB, 100 * GiB, "tpu"),
    # one 8 × H100 SXM node (a3-highgpu-8g: 1872 GiB RAM); nvidia-smi's 81,559 MiB per GPU, of which XLA takes the
    # USABLE_HBM share the launcher sets (`train.preallocation`)
    "h100x8": Target("h100x8", "h100", 8, int(USABLE_HBM * 81559 * 2**20), 1872 * GiB, 200 * GiB, "gpu"),
}
