"""The loop every recipe runs: propose drafts, apply the shared checks, keep until `n` questions."""

from __future__ import annotations

import collections
import dataclasses
import random
from collections.abc import Callable

from tqdm import tqdm

from jaxseeker.synthesis.qa.checks import Dedup, LeakCheck, finalize
from jaxseeker.synthesis.qa.record import Draft, QARecord
from jaxseeker.world import World

Propose = Callable[[World, random.Random], Draft | None]
Keep = Callable[[QARecord, Draft], str]
Rewrite = Callable[[QARecord], tuple[QARecord | None, str]]  # a record rephrased (`writer.LLMWriter`), or why not


@dataclasses.dataclass
class SynthResult:
    """The kept records, how many drafts were tried, and why the others were dropped."""

    records: list[QARecord]
    attempts: int
    dropped: collections.Counter

    @property
    def yield_rate(self) -> float:
        """Kept / tried."""
        return len(self.records) / max(1, self.attempts)


def run_recipe(
    world: World,
    propose: Propose,
    n: int,
    *,
    seed: int = 0,
    keep: Keep | None = None,
    rewrite: Rewrite | None = None,
    max_attempts: int | None = None,
    progress: bool = False,
    desc: str = "synth",
) -> SynthResult:
    """Draft with `propose` until `n` records pass the shared checks, then `rewrite` (a new text, or a reason to drop
    the record) and `keep` ("kept" or a reason)."""
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    rng = random.Random(seed)
    leak, dedup = LeakCheck(world), Dedup()
    limit = max_attempts if max_attempts is not None else 50 * n + 100
    records: list[QARecord] = []
    dropped: collections.Counter = collections.Counter()
    attempts = 0
    with tqdm(total=n, desc=desc, disable=not progress, unit="q") as bar:
        while len(records) < n and attempts < limit:
            attempts += 1
            draft = propose(world, rng)
            if draft is None:
                dropped["no_draft"] += 1
                continue
            record, why = finalize(world, draft, leak, dedup)
            if record is not None and rewrite is not None:
                record, why = rewrite(record)
            if record is not None and keep is not None:
                why = keep(record, draft)
            if record is None or why != "kept":
                dropped[why] += 1
                continue
            records.append(record)
            bar.update(1)
    return SynthResult(records, attempts, dropped)
