"""WebSeer self-reflection trajectories: the verdicts kept always match the truth (Ψ), wrong answers get fixed."""

from __future__ import annotations

import itertools
import json
import re

from traj_support import LOOP

from jaxseeker.rewards import exact_match
from jaxseeker.synthesis import (
    ExpertTeacher,
    ExpertVerifier,
    ReflectionConfig,
    reflection,
    reflection_funnel,
    reflection_registry,
    reflection_rollout_config,
    synthesize,
)


def _submissions(record: dict) -> list[tuple[str, str]]:
    """(proposed answer, verdict text) of every answer_submit call of a record."""
    out, messages = [], record["messages"]
    for m, reply in itertools.pairwise(messages):
        if m["role"] != "assistant":
            continue
        for body in re.findall(r"<tool_call>\n(.*?)\n</tool_call>", m["content"], re.DOTALL):
            call = json.loads(body)
            if call["name"] == "answer_submit":
                out.append((call["arguments"]["answer"], reply["content"]))
    return out


def _run(world, registry, tokenizer, questions, *, k: int, error_rate: float):
    cfg = ReflectionConfig(k_verify=k, verifier_error_rate=error_rate, mix_ratio=0.5)
    teacher = ExpertTeacher(world, submit=True, wrong_first_rate=cfg.multi_share)
    verifier = ExpertVerifier(teacher, registry, error_rate=error_rate)
    return synthesize(
        teacher,
        tokenizer,
        reflection_registry(registry, verifier, k=k),
        questions,
        reflection_funnel(n_max=cfg.n_max),
        tries=1,
        config=reflection_rollout_config(LOOP, cfg.n_max),
        mode="reflection",
        progress=False,
    )


def test_kept_reflective_trajectories_hold_only_true_verdicts(
    traj_world, traj_registry, traj_tokenizer, traj_questions
):
    questions = [q for q in traj_questions if q.meta["level"] <= 2][:36]
    records, stats = _run(traj_world, traj_registry, traj_tokenizer, questions, k=3, error_rate=0.3)
    assert len(records) >= 0.75 * len(questions), stats.summary(list(stats.entered))
    multi = 0
    for r in records:
        subs = _submissions(r)
        assert 1 <= len(subs) <= 3
        for proposal, verdict in subs:  # Ψ: CORRECT exactly for right answers
            assert "<tool_response>\nCORRECT" in verdict or "<tool_response>\nINCORRECT" in verdict
            assert ("<tool_response>\nCORRECT" in verdict) == exact_match(proposal, r["answer"]), (proposal, verdict)
        assert exact_match(subs[-1][0], r["answer"])
        assert r["messages"][-1]["content"].endswith(f"<answer>{r['prediction']}</answer>")
        if len(subs) > 1:
            multi += 1
            wrong = subs[0][0]
            later = " ".join(m["content"] for m in r["messages"] if m["role"] == "assistant")
            assert wrong in later and r["answer"] in later  # the wrong answer, the reflection and the fix
            assert r["answer"] not in subs[0][1]  # the verifier never gives the right answer away
    assert multi >= 3
    assert r["provenance"]["mode"] == "reflection"


def test_psi_drops_episodes_whose_verdicts_disagree_with_the_truth(
    traj_world, traj_registry, traj_tokenizer, traj_questions
):
    questions = [q for q in traj_questions if q.meta["level"] <= 2][:24]
    _, sloppy = _run(traj_world, traj_registry, traj_tokenizer, questions, k=1, error_rate=0.5)
    assert sloppy.entered["psi"] > sloppy.passed["psi"]  # one verifier sample, wrong half the time: Ψ drops
    assert any(reason.startswith("psi: verdict on") for reason in sloppy.reasons)
    _, resampled = _run(traj_world, traj_registry, traj_tokenizer, questions, k=8, error_rate=0.5)
    assert resampled.passed["psi"] > sloppy.passed["psi"]  # re-sampling the verifier recovers them


def test_balance_mix_brings_records_to_the_ratio():
    records = [{"provenance": {"submissions": 1 + (i % 4 == 0)}} for i in range(40)]  # 30 single, 10 multi
    balanced = reflection.balance_mix(records, 1.5, seed=1)
    assert reflection.count_rounds(balanced) == (15, 10)
    assert reflection.count_rounds(reflection.balance_mix(records, 6.0)) == (30, 5)
    kept = {id(r) for r in balanced}
    assert balanced == [r for r in records if id(r) in kept]  # order kept
