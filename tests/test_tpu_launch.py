"""`tpu.py launch` watching a job: the decision (`tpu_scripts/supervise.py`) over scripted slice states, and the
whole loop run against a fake `gcloud`.

The real gcloud cannot run here (no Google Cloud from this machine), so the loop's test puts a small Python
`gcloud` on PATH that records each call's arguments and answers from a script: what the wait script prints on the
workers and which state `describe` reports, call by call. Everything else (the local check and plan, the commands
built, the pack of a checkout, the decisions) runs for real. The preempted slice's run starts the script as a user
does, in a new interpreter; the others call its `main` here (a new interpreter would import jax and plan again).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TPU = ROOT / "tpu_scripts" / "tpu.py"
sys.path.insert(0, str(TPU.parent))

import supervise  # noqa: E402
import tpu as tpu_script  # noqa: E402
from supervise import DONE, FAIL, GIVE_UP, RECREATE, WAIT, job_status, next_action, slice_state  # noqa: E402
from test_tpu_scripts import WHERE, dry_run, remote  # noqa: E402

CONFIG = "configs/webexplorer_qwen3-8b_sft.yaml"  # fsdp 32 × context 2: a v6e-64 slice


def test_job_status_reads_every_workers_marker():
    assert job_status(0, "jaxseeker-exit=0\njaxseeker-exit=0\n") == 0
    assert job_status(1, "jaxseeker-exit=0\njaxseeker-exit=3\n") == 3  # one worker failed: the run failed
    assert job_status(0, "jaxseeker-exit=killed\n") == supervise.KILLED
    assert job_status(255, "") is None  # the session ended without an answer
    assert job_status(255, "jaxseeker-exit=0\n") is None  # one worker said 0, the others did not answer


def test_slice_state_from_describe():
    assert slice_state(0, "ACTIVE\n", "") == "ACTIVE"
    assert slice_state(1, "", "ERROR: (gcloud.compute.tpus.queued-resources.describe) NOT_FOUND: wex") == "NOT_FOUND"
    assert slice_state(1, "", "ERROR: network is unreachable") == "UNKNOWN"


def run_decisions(events: list[tuple[int | None, str]], max_retries: int = 3, can_recreate: bool = True) -> list[str]:
    """The actions the launcher takes over a scripted run: (job exit status, slice state) after each wait, with
    the counters kept as `tpu.supervise_launch` keeps them."""
    retries = checks = 0
    actions = []
    for code, state in events:
        action = next_action(
            code, state, retries=retries, max_retries=max_retries, checks=checks, can_recreate=can_recreate
        )
        actions.append(action)
        if action == WAIT:
            checks += 1
        elif action == RECREATE:
            retries, checks = retries + 1, 0
        else:
            break
    return actions


@pytest.mark.parametrize(
    "events, max_retries, expected",
    [
        ([(0, "ACTIVE")], 3, [DONE]),
        ([(1, "ACTIVE")], 3, [FAIL]),  # a failure on a healthy slice is not retried
        ([(None, "SUSPENDED"), (143, "PREEMPTED"), (0, "ACTIVE")], 3, [RECREATE, RECREATE, DONE]),
        ([(None, "NOT_FOUND"), (None, "SUSPENDED")], 1, [RECREATE, GIVE_UP]),  # retries bounded
        ([(None, "ACTIVE"), (None, "ACTIVE"), (0, "ACTIVE")], 3, [WAIT, WAIT, DONE]),  # a dropped session
        # a preemption's SIGTERM seen before the state caught up; then the state says it
        ([(143, "ACTIVE"), (143, "SUSPENDING"), (None, "ACTIVE")], 3, [WAIT, RECREATE, WAIT]),
        ([(143, "ACTIVE")] * 4, 3, [WAIT, WAIT, WAIT, FAIL]),  # `tpu.py stop`: killed on a healthy slice
        ([(None, "REPAIRING")] * 11, 3, [WAIT] * 10 + [GIVE_UP]),
    ],
)
def test_decisions_over_scripted_runs(events, max_retries, expected):
    assert run_decisions(events, max_retries) == expected


def test_a_lost_slice_without_its_shape_is_given_up():
    assert run_decisions([(None, "PREEMPTED")], can_recreate=False) == [GIVE_UP]


FAKE_GCLOUD = r'''#!{python}
"""A stand-in for gcloud: records its arguments, answers wait scripts and describes from the scripted lists."""
import json, pathlib, sys
here = pathlib.Path(__file__).parent
args = sys.argv[1:]
with open(here / "calls.jsonl", "a") as f:
    f.write(json.dumps(args) + "\n")
def next_answer(name):
    path = here / name
    answers = json.loads(path.read_text())
    path.write_text(json.dumps(answers[1:]))
    return answers[0]
if "describe" in args:
    state = next_answer("states.json")
    if state == "NOT_FOUND":
        sys.exit(print("ERROR: (gcloud) NOT_FOUND: the resource was not found", file=sys.stderr) or 1)
    print(state)
elif any(a.startswith("--command=") and "jaxseeker-exit=" in a for a in args):
    rc, out = next_answer("waits.json")
    print(out, end="")
    sys.exit(rc)
'''


def fake_gcloud(tmp_path: Path, waits: list, states: list[str]) -> tuple[Path, dict[str, str]]:
    """The fake gcloud's directory, scripted with `waits` and `states`, and an environment with it first on PATH."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    gcloud = bin_dir / "gcloud"
    gcloud.write_text(FAKE_GCLOUD.replace("{python}", sys.executable))
    gcloud.chmod(0o755)
    (bin_dir / "waits.json").write_text(json.dumps(waits))
    (bin_dir / "states.json").write_text(json.dumps(states))
    return bin_dir, dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}", PYTHONPATH=str(ROOT))


def launch_with_fake_gcloud(
    tmp_path: Path,
    waits: list,
    states: list[str],
    argv: tuple[str, ...] = (),
    monkeypatch: pytest.MonkeyPatch | None = None,
) -> tuple[subprocess.CompletedProcess, list[list[str]]]:
    """Run `tpu.py launch` (no --dry-run) against the fake gcloud; return (process, the gcloud calls). With
    `monkeypatch`, the script's `main` runs in this process with the fake gcloud first on its PATH (the same loop and
    gcloud calls; the local check's imports of jax and its plan are this process's already); without, the script
    runs as a script in a new interpreter, as a user starts it."""
    bin_dir, env = fake_gcloud(tmp_path, waits, states)
    repo = tmp_path / "repo"  # the checkout setup packs: a recipe and a pyproject, no more
    (repo / "configs").mkdir(parents=True)
    shutil.copy(ROOT / CONFIG, repo / CONFIG)
    (repo / "pyproject.toml").write_text("")
    name = f"wex-{tmp_path.name}"
    args = ["launch", name, "--zone", "z", "--accelerator", "v6e-64", "--spot", "--repo", str(repo), "--bucket",
            "gs://b", "--run", "r", "--poll", "0", *argv, "--", "sft", "--config", CONFIG]  # fmt: skip
    try:
        if monkeypatch is None:
            proc = subprocess.run(
                [sys.executable, str(TPU), *args], env=env, capture_output=True, text=True, timeout=600, check=False
            )
        else:
            monkeypatch.setenv("PATH", env["PATH"])
            stdout, stderr = io.StringIO(), io.StringIO()
            with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
                returncode = tpu_script.main(args)
            proc = subprocess.CompletedProcess(args, returncode, stdout.getvalue(), stderr.getvalue())
    finally:
        Path(f"/tmp/{name}-jaxseeker-src.tar.gz").unlink(missing_ok=True)  # setup's pack of `repo`
    calls = [json.loads(line) for line in (bin_dir / "calls.jsonl").read_text().splitlines()]
    return proc, calls


def verbs(calls: list[list[str]]) -> list[str]:
    """Each gcloud call as its verb: create / delete / describe for the slice, start / wait / setup over ssh."""
    out = []
    for call in calls:
        command = next((a for a in call if a.startswith("--command=")), "")
        if "jaxseeker-exit=" in command:
            out.append("wait")
        elif "setsid nohup" in command:
            out.append("start --resume" if "--resume" in command else "start")
        elif call[3] in ("create", "delete", "describe"):
            out.append(call[3])
        else:
            out.append("setup")
    return out


def test_a_preempted_slice_is_recreated_set_up_and_the_run_resumed(tmp_path):
    proc, calls = launch_with_fake_gcloud(
        tmp_path,
        waits=[[255, ""], [255, ""], [0, "jaxseeker-exit=0\njaxseeker-exit=0\n"]],
        states=["SUSPENDED", "ACTIVE", "ACTIVE", "ACTIVE"],  # after the wait; while created; after a drop; at the end
    )
    assert proc.returncode == 0, proc.stderr
    assert verbs(calls) == [
        "start",
        "wait",
        "describe",  # SUSPENDED: recreate
        "delete",
        "create",
        "describe",  # the new queued resource is ACTIVE
        *["setup"] * 3,  # copy, install, check devices
        "start --resume",
        "wait",  # the session drops
        "describe",  # ACTIVE: look again
        "wait",
        "describe",
    ]
    create = calls[4]
    assert create[3:5] == ["create", f"wex-{tmp_path.name}"] and "--spot" in create
    assert "--accelerator-type=v6e-64" in create
    assert "# check: the plan on 64 v6e chips" in proc.stdout
    assert "# job exit unknown, slice SUSPENDED: recreate" in proc.stdout
    assert "# job exit 0, slice ACTIVE: done" in proc.stdout


def test_retries_are_bounded(tmp_path, monkeypatch):
    proc, calls = launch_with_fake_gcloud(
        tmp_path,
        waits=[[255, ""], [255, ""]],
        states=["PREEMPTED", "ACTIVE", "NOT_FOUND"],
        argv=("--max-retries", "1"),
        monkeypatch=monkeypatch,
    )
    assert proc.returncode == 1
    assert verbs(calls).count("create") == 1 and verbs(calls)[-2:] == ["wait", "describe"]
    assert proc.stderr.strip() == "error: gave up on run r after 1 recreations"


def test_a_job_that_fails_on_a_healthy_slice_is_not_retried(tmp_path, monkeypatch):
    proc, calls = launch_with_fake_gcloud(
        tmp_path, waits=[[1, "jaxseeker-exit=2\n"]], states=["ACTIVE"], monkeypatch=monkeypatch
    )
    assert proc.returncode == 2  # the job's own status
    assert verbs(calls) == ["start", "wait", "describe"]


def test_a_run_whose_metrics_stop_advancing_is_reported_with_its_log_and_left_running(tmp_path, monkeypatch):
    hung = "jaxseeker-hang=45\nstep 120 loss 1.93\nall-reduce waiting on host 3\n"
    proc, calls = launch_with_fake_gcloud(
        tmp_path, waits=[[0, hung]], states=[], argv=("--hang-minutes", "45"), monkeypatch=monkeypatch
    )
    assert proc.returncode == 3
    assert verbs(calls) == ["start", "wait"]  # no stop, no describe: the job goes on
    assert "--hang-minutes" not in json.dumps(calls[0]) and "-mmin +45" in json.dumps(calls[1])
    report = proc.stderr.strip().splitlines()
    assert report[0].startswith("tpu.py launch: run r: no new step metrics for 45 minutes; the job is still running")
    assert report[1:] == ["step 120 loss 1.93", "all-reduce waiting on host 3"]


def create_with_fake_gcloud(tmp_path: Path, states: list[str], *argv: str) -> subprocess.CompletedProcess:
    """Run `tpu.py create` (no --dry-run) against the fake gcloud whose describe answers `states`."""
    _, env = fake_gcloud(tmp_path, [], states)
    return subprocess.run(
        [sys.executable, str(TPU), "create", "wex", "--zone", "z", "--accelerator", "v5p-64", "--poll", "0", *argv],
        env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def test_a_failed_queued_resource_is_reported_with_its_state(tmp_path):
    proc = create_with_fake_gcloud(tmp_path, ["WAITING_FOR_RESOURCES", "FAILED"])
    assert proc.returncode == 1
    assert "# state: WAITING_FOR_RESOURCES\n# state: FAILED\n" in proc.stdout
    assert proc.stderr.strip() == (
        "tpu.py create: queued resource wex is FAILED: it will not become ACTIVE; "
        "details: gcloud compute tpus queued-resources describe wex --zone=z"
    )


def test_a_queued_resource_still_waiting_at_the_timeout_is_reported_not_crashed(tmp_path):
    proc = create_with_fake_gcloud(tmp_path, ["WAITING_FOR_RESOURCES"], "--wait-timeout", "0")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    [line] = proc.stderr.strip().splitlines()
    assert line.startswith("tpu.py create: queued resource wex is still WAITING_FOR_RESOURCES after 0 s")
    assert "no capacity granted yet" in line


def test_an_active_queued_resource_ends_the_wait(tmp_path):
    proc = create_with_fake_gcloud(tmp_path, ["PROVISIONING", "ACTIVE"])
    assert proc.returncode == 0 and proc.stdout.endswith("# state: PROVISIONING\n# state: ACTIVE\n"), proc.stderr


def wait_script(*argv: str) -> str:
    """The wait script `tpu.py launch --dry-run` prints for run r1."""
    command = ("--", "sft", "--config", CONFIG)
    steps = dict(dry_run("launch", "wex", *WHERE, "--bucket", "gs://b", "--run", "r1", *argv, *command))
    return remote(steps["wait for the job"])


def worker_home(tmp_path: Path, metrics_age_s: float) -> dict[str, str]:
    """A worker's home with run r1's log, a live pid (this test's) and metrics last written `metrics_age_s` ago."""
    home = tmp_path / "home"
    metrics = home / "jaxseeker" / "runs" / "r1" / "metrics.jsonl"
    metrics.parent.mkdir(parents=True)
    metrics.write_text('{"step": 10}\n')
    os.utime(metrics, (time.time() - metrics_age_s,) * 2)
    (home / "r1.log").write_text("".join(f"line {i}\n" for i in range(40)))
    (home / "r1.pid").write_text(f"{os.getpid()}\n")
    return dict(os.environ, HOME=str(home))


def test_the_wait_script_reports_metrics_older_than_the_limit_with_the_logs_end(tmp_path):
    env = worker_home(tmp_path, metrics_age_s=2 * 3600)
    out = subprocess.run(["bash", "-c", wait_script("--hang-minutes", "90")], env=env, capture_output=True, text=True)
    last = [f"line {i}" for i in range(10, 40)]  # the log's last 30 lines
    assert out.returncode == 0 and out.stdout.splitlines() == ["jaxseeker-hang=90", *last]
    assert supervise.hang_report(out.stdout) == (90.0, "\n".join(last))


def test_the_wait_script_reports_the_exit_status_once_the_job_ended(tmp_path):
    env = worker_home(tmp_path, metrics_age_s=2 * 3600)
    (tmp_path / "home" / "r1.status").write_text("0\n")
    out = subprocess.run(["bash", "-c", wait_script()], env=env, capture_output=True, text=True)
    assert out.stdout == "jaxseeker-exit=0\n" and supervise.hang_report(out.stdout) is None
    assert "find " not in wait_script("--hang-minutes", "0")  # 0 turns the check off
