"""`jaxseeker rl` as two local CPU processes under jax.distributed, against the same recipe on one process.

The toy colour task (`train.rl.bench.write_toy`): B=4 questions × G=4 rollouts per step, 2 mini-batches,
default mesh, engine replicas of one device (`engine.tensor: 1`). The two processes (one CPU device each: fsdp=2
across them for the update, an engine each) train with the weights handed to their engines on device after each
update; as the second step starts, process 1 gets SIGTERM, as a preempted host does: both save the step at JAX's
preemption sync point (not a multiple of `checkpoint_every`) and stop, and two fresh processes resume from it
for the third (`multihost_rl_worker.py`). The lone process (one device) trains the three steps at once; a lone
process with four devices (fsdp=4 for the update, four engine replicas with the slots split over them) trains one
step, then resumes from its final checkpoint. All run side by side, each a fresh interpreter.

What must match: the questions of each step and every sampled token (the engine keys its randomness by
request id, which names the group's place in the step, not the process that rolls it out); hence the
rewards, and the update's losses and statistics, to the rounding of sums taken in another order
(`test_metrics_equal_the_one_process_run` derives the bounds), far below what one changed token moves them.

The trained parameters are not compared element by element: Adam (eps 1e-8) moves an element by
lr · g / (|g| + eps), ±lr for any |g| ≫ 1e-8, so an element whose gradient cancels to near 0 may move by lr one
way in one run and the other way in the other (a gradient slope of lr / eps = 2e6). Each run's parameter change
is compared as a whole instead: they may differ by whole Adam steps in a few elements, not in the many a wrong
update would change.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest
import yaml
from net_support import unused_port
from safetensors.numpy import load_file

from jaxseeker.agent import read_episodes
from jaxseeker.parallel import process_share
from jaxseeker.parallel.cpu_devices import fake_cpu_devices_env
from jaxseeker.train.metrics import read_metrics
from jaxseeker.train.rl.bench import toy_recipe, write_toy

pytestmark = pytest.mark.heavy  # a minute or more of CPU: runs first (tests/conftest.py)

WORKER = Path(__file__).with_name("multihost_rl_worker.py")
STEPS, B, G = 3, 4, 4
SIGTERM_STEP = 1  # process 1 of the two-process run gets SIGTERM as step index 1 (the second step) starts
CHECKPOINT_EVERY = 5  # no interval save in the run: the first save of the two processes is the preemption's
EPISODE_STATS = ("reward", "accuracy", "format_rate", "response_tokens", "context_tokens", "groups")
UPDATE_STATS = ("loss", "grad_norm", "entropy", "approx_kl", "ratio_mean", "ratio_max")
UPDATE_STATS += ("clip_frac_low", "clip_frac_high")


def launch(
    recipe: Path,
    out_dir: Path,
    first: int,
    total: int,
    devices: int,
    process: tuple[str, int, int] | None,
    log: Path,
    sigterm: int = -1,
    cache: str = "jax_cache",
) -> subprocess.Popen:
    """The worker in a new interpreter with `devices` CPU devices; `process` = (coordinator, count, id) or None.
    `cache`: its persistent compilation cache, under the recipe's directory."""
    env = dict(
        fake_cpu_devices_env(devices),
        JAX_COMPILATION_CACHE_DIR=str(recipe.parent / cache),
        JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0",
    )  # a run resumed in the same cache reuses compiles
    if process is not None:
        address, count, index = process
        env.update(JAX_COORDINATOR_ADDRESS=address, JAX_NUM_PROCESSES=str(count), JAX_PROCESS_ID=str(index))
    with log.open("w") as f:  # a file: a pipe nobody reads while waiting on another process could fill up
        return subprocess.Popen(
            [sys.executable, str(WORKER), str(recipe), str(out_dir), str(first), str(total), str(sigterm)],
            env=env,
            stdout=f,
            stderr=subprocess.STDOUT,
            text=True,
        )


def report(proc: subprocess.Popen, log: Path) -> dict:
    """The worker's JSON report (its last line), once it has exited cleanly."""
    if proc.wait(timeout=600) != 0:
        pytest.fail(
            f"{WORKER.name} {' '.join(proc.args[2:])} failed (exit {proc.returncode}):\n{log.read_text()[-4000:]}"
        )
    return json.loads(log.read_text().strip().splitlines()[-1])


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict:
    """Both runs' worker reports, metric rows and episodes of each step (by step, then (group, sample))."""
    root = tmp_path_factory.mktemp("multihost_rl")
    recipe = toy_recipe(
        write_toy(root / "toy", n_questions=12),
        root / "unused",
        steps=STEPS,
        batch_questions=B,
        group_size=G,
        checkpoint_every=CHECKPOINT_EVERY,
        episodes_every=1,
    )
    recipe["optimizer"]["total_steps"] = STEPS * recipe["rl"]["mini_batches"]  # the same schedule in every run
    recipe["engine"]["tensor"] = 1  # an engine replica per device
    path = root / "recipe.yaml"
    path.write_text(yaml.safe_dump(recipe))

    def two_processes(name: str, first: int, sigterm: int) -> dict:
        """Processes 0 and 1 of a job, with a compilation cache of their own: XLA:CPU programs that span two
        processes, written to the cache by process 0 and read back by both in a later job, hang in their first
        collective (jax 0.10.2), so the resumed job compiles afresh."""
        address = f"localhost:{unused_port()}"
        return {
            (name, p): launch(
                path,
                root / "two",
                first,
                STEPS,
                1,
                (address, 2, p),
                root / f"{name}_{p}.log",
                sigterm,
                cache=f"jax_cache_{name}",
            )
            for p in range(2)
        }

    procs = {
        "one": launch(path, root / "one", STEPS, STEPS, 1, None, root / "one.log"),
        "four": launch(path, root / "four", 1, STEPS, 4, None, root / "four.log"),
        **two_processes("preempted", STEPS, SIGTERM_STEP),
    }
    reports = {}
    try:
        for key in [("preempted", 0), ("preempted", 1)]:
            reports[key] = report(procs[key], root / f"{key[0]}_{key[1]}.log")
        procs.update(two_processes("resumed", STEPS, -1))
        reports.update(
            {
                k: report(proc, root / (f"{k}.log" if isinstance(k, str) else f"{k[0]}_{k[1]}.log"))
                for k, proc in procs.items()
                if k not in reports
            }
        )
    finally:  # a failed process leaves its peer waiting in a collective
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
    reports.update({p: reports[("resumed", p)] for p in range(2)})
    out = {"reports": reports, "root": root}
    for name in ("one", "two", "four"):
        out[name] = {
            "rows": read_metrics(root / name / "metrics.jsonl"),
            "episodes": {
                step: {
                    (e.group, e.sample): e for e in read_episodes(root / name / "episodes" / f"step_{step:06d}.jsonl")
                }
                for step in range(1, STEPS + 1)
            },
        }
    return out


def test_one_runtime_spans_both_processes(runs):
    reports = runs["reports"]
    assert [reports[p]["info"]["process_index"] for p in (0, 1)] == [0, 1]
    assert all(reports[p]["info"]["global_devices"] == 2 and reports[p]["info"]["local_devices"] == 1 for p in (0, 1))
    assert [reports[p]["main"] for p in (0, 1)] == [True, False]
    assert reports["one"]["info"]["process_count"] == 1 and reports["one"]["info"]["global_devices"] == 1


def test_each_process_rolls_out_its_own_groups_and_together_the_steps(runs):
    for step in range(1, STEPS + 1):
        two, one = runs["two"]["episodes"][step], runs["one"]["episodes"][step]
        assert sorted(two) == sorted(one) == [(g, s) for g in range(B) for s in range(G)]
        by_process = defaultdict(set)
        for (group, _), episode in two.items():
            by_process[episode.meta["process"]].add(group)
        assert by_process == {0: {0, 1}, 1: {2, 3}}, step  # disjoint halves, whole groups, union = the step
        assert {e.meta["process"] for e in one.values()} == {0}
        assert [two[g, 0].question for g in range(B)] == [one[g, 0].question for g in range(B)], step
    asked = [runs["one"]["episodes"][step][g, 0].question for step in range(1, STEPS + 1) for g in range(B)]
    assert len(set(asked)) == STEPS * B  # the steps walk through the 12 questions once


def test_every_sampled_token_is_the_one_process_runs(runs):
    for step in range(1, STEPS + 1):
        two, one = runs["two"]["episodes"][step], runs["one"]["episodes"][step]
        for key in one:
            assert two[key].token_ids == one[key].token_ids, (step, key)
            assert two[key].loss_mask == one[key].loss_mask, (step, key)
            assert two[key].logprobs == pytest.approx(one[key].logprobs, abs=1e-5), (step, key)
        assert len({e.prediction for e in one.values()}) > 1  # sampled, not a constant policy


def test_only_process_0_writes_metrics_and_reports(runs):
    assert [r["step"] for r in runs["two"]["rows"]] == list(range(1, STEPS + 1))  # not twice each
    summary = json.loads((runs["root"] / "two" / "summary.json").read_text())
    assert summary["resumed_from"] == SIGTERM_STEP + 1 and summary["steps"] == STEPS


def stats_bounds(runs, one: dict) -> dict[str, tuple[float, float]]:
    """(rel, abs) bound of each statistic of the one-process run's row `one` against another run with the same
    tokens. A sum of n terms added in another order moves by at most (n - 1) · u · Σ|x_i| (Higham, Accuracy and
    Stability of Numerical Algorithms, §4.2; u = 2^-53 in float64, 2^-24 in float32); two runs, each that far from
    the exact sum, differ by twice that.
    - Episode statistics: host float64 means over the step's B · G episodes (integer counts add exactly).
    - Update statistics: float32 reductions over a step's n = B · G · max_context_tokens positions, split over
      devices and processes. Their terms are non-negative (entropy, (r - 1) - log r, ratios, clip indicators,
      squared gradients, whose own sums are taken as the norm's), so Σ|x_i| is the sum and the bound relative.
    - The loss, a mean of A · min(r, clip(r)) whose advantages cancel within a group: absolute, with
      Σ|x_i| ≤ n · √(G − 1) · max(ratio_max, 2) (|A| ≤ √(G − 1) for a population z-score over G rollouts,
      Samuelson's inequality; the clip's upper end 1 + eps_high lies below 2).
    The params entering a later update differ by rounding of the same kind (`test_the_runs_change_the_params_alike`).
    """
    recipe = yaml.safe_load((runs["root"] / "recipe.yaml").read_text())
    n = B * G * recipe["rollout"]["max_context_tokens"]
    episode_rel, update_rel = 2 * B * G * 2.0**-53, 2 * n * 2.0**-24
    bounds = {key: (episode_rel, 0.0) for key in EPISODE_STATS} | {key: (update_rel, 0.0) for key in UPDATE_STATS}
    return bounds | {"loss": (0.0, update_rel * np.sqrt(G - 1) * max(one["ratio_max"], 2.0))}


def test_metrics_equal_the_one_process_run(runs):
    for two, one in zip(runs["two"]["rows"], runs["one"]["rows"], strict=True):
        bounds = stats_bounds(runs, one)
        assert bounds["entropy"][0] < 1e-3  # far below what one changed token moves the statistics on this task
        for key, (rel, abs_) in bounds.items():
            assert two[key] == pytest.approx(one[key], rel=rel, abs=abs_), (one["step"], key)
        assert two["skipped_update"] == one["skipped_update"] == 0.0  # an update ran in both steps
    first, second = runs["one"]["rows"][:2]
    assert second["loss"] != pytest.approx(first["loss"], abs=stats_bounds(runs, first)["loss"][1])


def test_a_preempted_host_stops_both_at_a_saved_step_and_fresh_processes_resume_there(runs):
    """The SIGTERM reaches process 1 as step 2 starts; JAX's preemption sync point is the next step both report
    (max + 1 of the steps they had reached: 1), so both save step 2 (not a multiple of CHECKPOINT_EVERY, not the last)
    and stop; without the preemption policy they would have run on to step 3."""
    preempted = [runs["reports"][("preempted", p)]["interrupted"] for p in (0, 1)]
    assert preempted == [{"step": SIGTERM_STEP + 1, "signal": "SIGTERM"}] * 2
    checkpoints = runs["root"] / "two" / "checkpoints"
    assert sorted(int(p.name) for p in checkpoints.iterdir() if p.name.isdigit()) == [SIGTERM_STEP + 1, STEPS]
    step_dir = checkpoints / str(SIGTERM_STEP + 1)
    written = sorted(p.name for p in (step_dir / "state").iterdir() if p.name.startswith("ocdbt.process_"))
    assert written == ["ocdbt.process_0", "ocdbt.process_1"]  # collective: each process its own shards
    states = json.loads((step_dir / "data" / "metadata").read_text())["per_process"]  # orbax's JsonSave file
    assert len(states) == 2 and states[0] == states[1]  # the same sampler state on both processes
    assert states[0]["sampler"] == {"epoch": 0, "position": (SIGTERM_STEP + 1) * B}
    assert [runs["reports"][p]["resumed_from"] for p in (0, 1)] == [[SIGTERM_STEP + 1]] * 2
    assert runs["reports"]["four"]["resumed_from"] == [0, 1]


@pytest.mark.parametrize("name", [0, 1, "one", "four"])
def test_the_engine_gets_the_updated_weights_on_device(runs, name):
    """After the last update each engine holds exactly the trained params (the toy computes in float32, so the cast
    is exact) as arrays of its own process's devices, and no weight went through a host gather on the way."""
    report = runs["reports"][name]
    assert report["engine_local"] and report["engine_equals_trained"]
    assert report["gathered_weights"] == []
    if name in (0, 1):
        assert report["gathers"] > 0  # the episodes are exchanged through process_allgather: the record works


def test_params_spread_over_both_processes_save_as_one_hf_checkpoint(runs):
    for name in ("two", "four", "one"):  # fsdp over the processes; over four devices; one device
        saved = load_file(runs["root"] / name / "hf" / "model.safetensors")
        with np.load(runs["root"] / name / "params.npz") as whole:  # the same params gathered whole
            assert sorted(saved) == sorted(whole.files) and "model.layers.0.self_attn.q_proj.weight" in saved
            for key, tensor in saved.items():
                np.testing.assert_array_equal(tensor, whole[key], err_msg=f"{name}: {key}")
    two, one = runs["root"] / "two" / "hf", runs["root"] / "one" / "hf"
    assert json.loads((two / "config.json").read_text()) == json.loads((one / "config.json").read_text())


FLIPPED = 10  # elements allowed to take opposite Adam steps between two runs (a gradient that cancels to ~0)


def test_the_runs_change_the_params_alike(runs):
    """Per element, |p_run − p_one| ≤ updates · lr · n · 2^-24 but in at most FLIPPED elements, and ≤ 2 · lr · updates
    in every one. A float32 sum of at most n terms (n = a step's episode positions) is off by at most n · 2^-24
    relative, and Adam's update lr · m̂ / (√v̂ + eps) moves by at most lr times that relative change; where a gradient
    cancels to about 0 that relative bound fails, and the update may flip, but Adam moves any element by at most lr
    per update (b1² ≤ b2, Kingma & Ba §2.1). A wrong update would move thousands of elements by far more."""
    recipe = yaml.safe_load((runs["root"] / "recipe.yaml").read_text())
    start = load_file(Path(recipe["model"]["hf_path"]) / "model.safetensors")
    lr, updates = recipe["optimizer"]["lr"], STEPS * recipe["rl"]["mini_batches"]
    n = B * G * recipe["rollout"]["max_context_tokens"]
    rounding, step_bound = updates * lr * n * 2.0**-24, 2 * lr * updates
    flat = {
        name: np.concatenate(
            [
                load_file(runs["root"] / name / "hf" / "model.safetensors")[k].astype(np.float64).ravel()
                for k in sorted(start)
            ]
        )
        for name in ("one", "two", "four")
    }
    moved = np.abs(flat["one"] - np.concatenate([start[k].astype(np.float64).ravel() for k in sorted(start)]))
    assert (moved > 100 * rounding).sum() > 5 * FLIPPED  # training moved many elements far beyond the tolerance
    for name in ("two", "four"):
        diff = np.abs(flat[name] - flat["one"])
        assert (diff > rounding).sum() <= FLIPPED and diff.max() <= step_bound, name


@pytest.mark.parametrize("n, count", [(4, 2), (5, 2), (3, 4), (16, 3)])
def test_process_shares_are_contiguous_disjoint_and_cover_the_groups(n, count):
    shares = [process_share(n, p, count) for p in range(count)]
    assert [i for share in shares for i in share] == list(range(n))
    assert max(map(len, shares)) - min(map(len, shares)) <= 1
    with pytest.raises(ValueError, match=r"index=2 must lie in \[0, count=2\)"):
        process_share(n, 2, 2)


def test_a_lone_process_on_four_engine_replicas_splits_the_slots_and_matches_one_device(runs):
    assert runs["reports"]["four"]["info"] == {
        "process_index": 0,
        "process_count": 1,
        "local_devices": 4,
        "global_devices": 4,
    }
    assert runs["reports"]["four"]["engine_k_spec"] == "P('data',)"  # one layer's slots over 4 engine replicas
    for step in range(1, STEPS + 1):
        four, one = runs["four"]["episodes"][step], runs["one"]["episodes"][step]
        assert {key: e.token_ids for key, e in four.items()} == {key: e.token_ids for key, e in one.items()}, step
    for four, one in zip(runs["four"]["rows"], runs["one"]["rows"], strict=True):
        for key, (rel, abs_) in stats_bounds(runs, one).items():
            assert four[key] == pytest.approx(one[key], rel=rel, abs=abs_), (one["step"], key)
