"""Host-side pieces of the RL loop: the reward config, episode scoring (format, judge, recipe reward) and the
question sampler whose state goes into checkpoints."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxseeker import losses, rewards
from jaxseeker.agent import Episode
from jaxseeker.agent.parser import parse_answer
from jaxseeker.agent.submit import format_ok
from jaxseeker.rewards.judges import gold_answers
from jaxseeker.rewards.srrl import SUBMIT_THRESHOLD
from jaxseeker.tools import LLMClient, LLMConfig

JUDGES = ("em", "f1", "llm")


@dataclasses.dataclass(frozen=True)
class RewardConfig:
    """How an episode is scored: `fn` (a recipe reward by name) of its judged outcome.

    judge: "em" (normalised exact match), "f1" (token F1 as a score) or "llm" (an OpenAI-compatible
    grader, `llm` = LLMConfig keys, `judge_style` browsecomp | gaia; parse failures count as wrong and
    are reported). submit_threshold: the F1 at which SRRL's `answer_submit` says "Correct!".
    overlong_buffer > 0 discounts whatever `fn` gives by DAPO's soft overlong punishment (`rewards.overlong_penalty`:
    a factor 1 up to overlong_max_tokens - overlong_buffer tokens written by the policy, then down linearly to
    1 - overlong_penalty at overlong_max_tokens).
    """

    fn: str = "webdancer"  # webdancer | websailor | webexplorer | webseer | evidence | package.module:function
    kwargs: Mapping[str, Any] = dataclasses.field(default_factory=dict)  # keywords of the reward function
    judge: str = "em"  # em | f1 | llm
    judge_style: str = "browsecomp"  # the llm judge's prompt: browsecomp | gaia
    llm: Mapping[str, Any] | None = None
    judge_workers: int = 8  # episodes judged at once
    submit_threshold: float = SUBMIT_THRESHOLD  # F1 from which answer_submit says "Correct!"
    overlong_buffer: int = 0  # L_cache of DAPO's soft overlong punishment (0: off)
    overlong_max_tokens: int = 0  # L_max: policy tokens at which the punishment is whole
    overlong_penalty: float = 1.0  # the punishment at overlong_max_tokens

    def __post_init__(self):
        rewards.get_reward_fn(self.fn)  # an unknown name fails here, listing the known ones
        if self.overlong_buffer:
            try:
                rewards.overlong_penalty(
                    0, max_tokens=self.overlong_max_tokens, buffer=self.overlong_buffer, penalty=self.overlong_penalty
                )
            except ValueError as e:
                raise ValueError(f"overlong_buffer / overlong_max_tokens / overlong_penalty: {e}") from None
        if self.judge not in JUDGES:
            raise ValueError(f"judge {self.judge!r} is not one of {list(JUDGES)}")
        if self.judge == "llm" and self.llm is None:
            raise ValueError("judge 'llm' needs an `llm` section (base_url, model, api_key_env, …)")
        if self.judge_style not in rewards.JUDGE_STYLES:
            raise ValueError(f"judge_style {self.judge_style!r} is not one of {list(rewards.JUDGE_STYLES)}")


@dataclasses.dataclass(frozen=True)
class Score:
    """One episode's judged outcome and reward."""

    reward: float
    outcome: rewards.EpisodeOutcome
    judge_parse_error: bool = False


def answer_attempts(episode: Episode) -> int:
    """T of SRRL's F1·alpha^T: the `answer_submit` calls plus the final `<answer>` turn, if the episode ends with one
    (two wrong submissions then a right answer are three attempts); 1 for a plain ReAct answer, 0 for none."""
    turns = [m["content"] for m in episode.messages if m["role"] == "assistant"]
    return len(episode.submissions) + int(bool(turns) and parse_answer(turns[-1]) is not None)


class Scorer:
    """Scores episodes with the recipe reward (plus the overlong punishment when on); LLM judgements run
    concurrently on a thread pool."""

    def __init__(self, config: RewardConfig):
        self.config = config
        self.reward_fn = rewards.get_reward_fn(config.fn)
        self.kwargs = dict(config.kwargs)
        self._client = LLMClient(LLMConfig(**config.llm)) if config.judge == "llm" else None

    def correct(self, episode: Episode, golds: list[str], f1: float) -> tuple[bool | float, bool]:
        """(verdict or score, parse error) of the configured judge for the episode's prediction."""
        pred = episode.prediction
        if pred is None:
            return False, False
        if self.config.judge == "em":
            return rewards.exact_match(pred, golds), False
        if self.config.judge == "f1":
            return f1, False
        result = rewards.llm_judge(
            episode.question, pred, golds[0], self._client.complete, style=self.config.judge_style
        )
        return result.correct is True, result.correct is None

    def score(self, episode: Episode) -> Score:
        """The outcome (format, verdict, F1, policy tokens, submissions) and reward of one episode."""
        golds = gold_answers(episode.answer)
        f1 = rewards.token_f1(episode.prediction, golds) if episode.prediction is not None else 0.0
        correct, parse_error = self.correct(episode, golds, f1)
        outcome = rewards.EpisodeOutcome(
            format_ok=format_ok(episode),
            correct=correct,
            f1=f1,
            n_tokens=episode.num_sampled,
            n_submissions=answer_attempts(episode),
            evidence=rewards.evidence_recall(episode.tool_calls, episode.meta.get("meta", {}).get("urls", ())) or 0.0,
        )
        reward = float(self.reward_fn(outcome, **self.kwargs))
        if self.config.overlong_buffer:  # a discount, so a wrong answer's 0 stays the group's least (rewards.gated)
            reward *= 1.0 + rewards.overlong_penalty(
                outcome.n_tokens,
                max_tokens=self.config.overlong_max_tokens,
                buffer=self.config.overlong_buffer,
                penalty=self.config.overlong_penalty,
            )
        return Score(reward, outcome, parse_error)

    def score_all(self, episodes: Sequence[Episode]) -> list[Score]:
        """`score` of every episode, in order (concurrently when a remote judge is used)."""
        if self._client is None:
            return [self.score(e) for e in episodes]
        with ThreadPoolExecutor(max_workers=max(1, self.config.judge_workers)) as pool:
            return list(pool.map(self.score, episodes))


def score_metrics(episodes: Sequence[Episode], scores: Sequence[Score]) -> dict[str, float]:
    """Per-step means over the rolled-out episodes: reward, accuracy, format rate, tools, lengths, terminations."""
    n = max(len(episodes), 1)
    metrics = {
        "reward": float(np.mean([s.reward for s in scores])) if scores else 0.0,
        "accuracy": sum(float(s.outcome.correct) for s in scores) / n,
        "f1": sum(s.outcome.f1 for s in scores) / n,
        "evidence": sum(s.outcome.evidence for s in scores) / n,
        "format_rate": sum(s.outcome.format_ok for s in scores) / n,
        "tool_calls": sum(len(e.tool_calls) for e in episodes) / n,
        "turns": sum(e.turns for e in episodes) / n,
        "response_tokens": sum(e.num_sampled for e in episodes) / n,
        "context_tokens": sum(len(e.token_ids) for e in episodes) / n,
        "submissions": sum(len(e.submissions) for e in episodes) / n,
        "judge_parse_errors": float(sum(s.judge_parse_error for s in scores)),
    }
    for name in ("answer", "max_tool_calls", "max_context", "format_error", "timeout"):
        metrics[f"term_{name}"] = sum(e.termination == name for e in episodes) / n
    return metrics


class QuestionSampler:
    """Indices into a pool of questions, a fresh seeded shuffle every epoch; `state()` is JSON for checkpoints."""

    def __init__(self, pool: Sequence[int], seed: int, state: Mapping[str, int] | None = None):
        if not pool:
            raise ValueError("QuestionSampler: the question pool is empty")
        self.pool = [int(i) for i in pool]
        self.seed = seed
        self.epoch = int(state["epoch"]) if state else 0
        self.position = int(state["position"]) if state else 0

    def _order(self) -> list[int]:
        order = np.random.default_rng([self.seed, self.epoch]).permutation(len(self.pool))
        return [self.pool[i] for i in order]

    def take(self, n: int) -> list[int]:
        """The next `n` question indices (crossing into the next epoch's order when this one runs out)."""
        out: list[int] = []
        while len(out) < n:
            order = self._order()
            take = order[self.position : self.position + n - len(out)]
            out += take
            self.position += len(take)
            if self.position >= len(order):
                self.epoch, self.position = self.epoch + 1, 0
        return out

    def state(self) -> dict[str, int]:
        """{"epoch", "position"}: where the next `take` starts."""
        return {"epoch": self.epoch, "position": self.position}


def episode_advantages(rl: Any, rewards: np.ndarray) -> np.ndarray:
    """`[B·G]` advantages of `[B, G]` rewards: the function `rl.advantage` (an `RLConfig`'s) names, with
    `rl.advantage_kwargs`, its group statistics in float64 (under `jax.enable_x64`), returned as float32."""
    fn = losses.get_advantage(rl.advantage)
    with jax.enable_x64(True):
        adv = np.asarray(fn(jnp.asarray(rewards.reshape(-1), jnp.float64), rl.group_size, **rl.advantage_kwargs))
    if adv.shape != (rewards.size,):
        raise ValueError(
            f"advantage {rl.advantage!r} returned shape {adv.shape}; expected ({rewards.size},), one per rollout"
        )
    return adv.astype(np.float32)
