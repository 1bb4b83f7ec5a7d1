"""The preemption save against a spot VM's notice: the bytes each host writes and the seconds they take.

When a spot TPU VM or GCE VM is preempted it gets `Target.notice_s` (30 s) before it stops. The save it makes then
(`train.checkpoint`'s preemption sync point, or inside an RL update `train.rl.midstep.save_mid_step`) writes the
whole train state: every host writes its chips' shards of the f32 params and Adam's two f32 moments (and
MultiSteps' f32 accumulator with grad_accum > 1), as `targets.state_bytes` counts them (a shard replicated over
the data axis counted on every host: an upper bound). At the target's `write_bytes_per_s` per host (a stated
assumption, `chips.WRITE_BYTES_PER_S`) that takes bytes / bandwidth seconds, all hosts writing at once. When it
does not fit the notice the plan says what would: a save of the params alone (a quarter of the state or less),
the write bandwidth that would fit (a local SSD), or the hosts over which the state would be split thinly enough.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from jaxseeker.model.config import ModelConfig
from jaxseeker.parallel.rules import Rules
from jaxseeker.planning.chips import GiB, Target
from jaxseeker.planning.memory import StageShape, abstract_mesh, param_elements
from jaxseeker.planning.targets import state_bytes


def preemption_report(
    cfg: ModelConfig, stage: StageShape, rules: Rules, sizes: Mapping[str, int], target: Target
) -> dict[str, Any]:
    """Per host of `target`, on the mesh `sizes`: the bytes a preemption save writes, its seconds at the target's
    write bandwidth, whether that fits the notice, and the options that would (module docstring)."""
    mesh = abstract_mesh(sizes)
    per_host = target.per_host
    hosts = max(1, math.prod(sizes.values()) // per_host)
    state = per_host * state_bytes(cfg, stage, rules, mesh)
    params = per_host * 4.0 * param_elements(cfg, rules, mesh)
    bandwidth = target.write_bytes_per_s
    return {
        "bytes_per_host": state,
        "write_bytes_per_s": bandwidth,
        "save_s": state / bandwidth,
        "notice_s": target.notice_s,
        "fits": state / bandwidth <= target.notice_s,
        "params_bytes_per_host": params,
        "params_save_s": params / bandwidth,
        "bandwidth_needed": state / target.notice_s,
        "hosts": hosts,
        "hosts_needed": math.ceil(hosts * state / (bandwidth * target.notice_s)),
    }


def preemption_lines(p: Mapping[str, Any]) -> list[str]:
    """The plan's lines on its preemption save (`preemption_report`)."""
    gb = p["write_bytes_per_s"] / 1e9
    lines = [
        f"preemption save: {p['bytes_per_host'] / GiB:,.1f} GiB a host (params + optimizer state shards) in "
        f"{p['save_s']:,.1f} s at {gb:g} GB/s a host (Target.write_bytes_per_s, assumed): "
        + ("fits" if p["fits"] else "does NOT fit")
        + f" the {p['notice_s']:g} s notice"
    ]
    if not p["fits"]:
        lines.append(
            f"  options: a mid-update save of the params alone ({p['params_bytes_per_host'] / GiB:,.1f} GiB, "
            f"{p['params_save_s']:,.1f} s); a local SSD writing {p['bandwidth_needed'] / 1e9:,.2f} GB/s a host; "
            f"or {p['hosts_needed']} hosts instead of {p['hosts']} (a host's share of the state shrinks)"
        )
    return lines
