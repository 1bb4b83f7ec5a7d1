"""The policy teacher: the real generation Engine behind rejection sampling (a tiny model with set weights)."""

from __future__ import annotations

from traj_support import DATE

from jaxseeker.agent import RolloutConfig, as_question, tool_calling_model
from jaxseeker.synthesis import PolicyTeacher, Stage, synthesize, validity
from jaxseeker.tools import ToolsConfig, build_registry
from jaxseeker.world import Corpus, Page

CALL = '{"name": "search", "arguments": {"query": ["Velmora bridge"]}}'


def test_policy_teacher_rolls_out_on_the_engine_and_is_filtered():
    tokenizer, cfg, params = tool_calling_model(CALL, mean_think_tokens=3.0)
    corpus = Corpus([Page("https://w.test/velmora", "Velmora", "Velmora has a bridge with nine arches.")])
    registry = build_registry(ToolsConfig(enabled=("search",)), corpus=corpus)
    config = RolloutConfig(
        date=DATE, max_tool_calls=2, max_context_tokens=2048, max_tokens_per_turn=64, answer_reserve_tokens=0
    )
    questions = [as_question({"question": "How many arches has the bridge of Velmora?", "answer": "nine"})]
    records, stats = synthesize(
        PolicyTeacher(params, cfg, slots=2),
        tokenizer,
        registry,
        questions,
        [Stage("validity", validity)],
        tries=2,
        config=config,
        progress=False,
    )
    assert records == [] and stats.rounds == [1, 1]  # it only ever searches: never an answer, so never kept
    assert dict(stats.reasons) == {"validity: ended by max_tool_calls, not an answer": 2}, stats.reasons
