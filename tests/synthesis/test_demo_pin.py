"""`make demo`'s questions and expert trajectories stay as they were: the pipeline's QA stage with demo.yaml's qa,
expert and tools sections, on a small world at a fixed seed, pinned by a digest of the first records."""

from __future__ import annotations

import hashlib
import json

from traj_support import LOOP

from jaxseeker.agent import as_question
from jaxseeker.pipeline.data_config import ExpertStage, QAStage, pipeline_tools
from jaxseeker.pipeline.questions import draft
from jaxseeker.synthesis import ExpertTeacher, synthesize, webdancer_funnel
from jaxseeker.tools import build_registry

DEMO_QA = QAStage(recipes={"e2hqa": 3000}, e2hqa_rounds=(0, 1), n_test=40, n_rl=48)
DEMO_EXPERT = ExpertStage(tries=1, detour_rate=0.1, snippet_rate=0.8)
DEMO_TOOLS = pipeline_tools({"title_first": True, "visit": {"goal_passages": 2, "max_links": 0}})


def digest(objs: list) -> str:
    return hashlib.sha256(json.dumps(objs, sort_keys=True, ensure_ascii=False).encode()).hexdigest()[:16]


def test_demo_questions_and_expert_trajectories_are_pinned(traj_world, traj_tokenizer):
    records = [r.to_json() for r in draft(traj_world, DEMO_QA, "e2hqa", 24, seed=0, progress=False).records]
    assert len(records) == 24
    registry = build_registry(DEMO_TOOLS, corpus=traj_world.corpus)
    teacher = ExpertTeacher(traj_world, DEMO_EXPERT.config(), title_first=True)
    questions = [as_question(r) for r in records[:12]]
    trajectories, _ = synthesize(
        teacher, traj_tokenizer, registry, questions, webdancer_funnel(), tries=1, config=LOOP, progress=False
    )
    assert len(trajectories) >= 8
    assert (digest(records), digest([t["messages"] for t in trajectories])) == ("5e00d92215d7b94e", "815b017e4187f361")
