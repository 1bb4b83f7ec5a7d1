"""`tpu_scripts/tpu.py --dry-run` prints the gcloud commands of each stage; the remote scripts run under bash.

The dry runs are parsed back with shlex and their flags checked. Two scripts also really run here:
`setup`'s pack command (a tarball of a small checkout), and `launch`'s worker script under bash, with
`curl` (the TPU VM metadata server) and `gcloud` replaced by stubs on PATH, since neither service is
reachable from this machine. `launch`'s local check runs for real (jaxseeker's parser, a shipped recipe, the
plan); how it watches a job and recreates a lost slice is in test_tpu_launch.py.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shlex
import stat
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TPU = ROOT / "tpu_scripts" / "tpu.py"
if str(TPU.parent) not in sys.path:  # the script's own imports (supervise, slices, …) resolve as when it runs
    sys.path.insert(0, str(TPU.parent))

import tpu as tpu_script  # noqa: E402

GPU_CHECK = ROOT / "tpu_scripts" / "gpu_check.sh"
WHERE = ["--zone", "us-east5-a", "--project", "my-proj"]


def tpu(stage: str, *argv: str, check: bool = True) -> subprocess.CompletedProcess:
    """`tpu.py STAGE --dry-run ARGV…` (the flag before any `--`, after which the remote command starts), its `main`
    called in this process from the repository root: a dry run starts nothing, and a new interpreter per call would
    import jaxseeker and jax again for `launch`'s check. test_tpu_launch.py runs the script itself."""
    args = [str(TPU), stage, "--dry-run", *argv]
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.chdir(ROOT), contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        try:
            returncode = tpu_script.main(args[1:])
        except SystemExit as e:  # argparse's usage errors
            returncode = e.code if isinstance(e.code, int) else 1
    result = subprocess.CompletedProcess(args, returncode, stdout.getvalue(), stderr.getvalue())
    if check:
        result.check_returncode()
    return result


def dry_run(stage: str, *argv: str) -> list[tuple[str, list[str]]]:
    """(stage, command argv) for each stage `tpu.py STAGE --dry-run …` prints (launch's local check left out)."""
    out = tpu(stage, *argv).stdout
    lines = [line for line in out.splitlines() if not line.startswith(("# check:", "#   ")) and line != "#"]
    assert len(lines) % 2 == 0 and all(line.startswith("# ") for line in lines[::2]), out
    return [(stage[2:], shlex.split(cmd)) for stage, cmd in zip(lines[::2], lines[1::2])]


def flag(cmd: list[str], name: str) -> str:
    """The value of `--name=value` in a command."""
    values = [a.split("=", 1)[1] for a in cmd if a.startswith(f"--{name}=")]
    assert len(values) == 1, (name, cmd)
    return values[0]


def remote(cmd: list[str]) -> str:
    """The bash script an ssh step runs on the workers."""
    assert cmd[:5] == ["gcloud", "compute", "tpus", "tpu-vm", "ssh"], cmd
    return flag(cmd, "command")


def test_create_queues_the_slice_and_waits_for_it():
    (stage, create), (wait, describe) = dry_run("create", "wex", *WHERE, "--accelerator", "v5p-64", "--spot")
    assert (stage, wait) == ("create", "wait until ACTIVE")
    assert create[:6] == ["gcloud", "compute", "tpus", "queued-resources", "create", "wex"]
    assert flag(create, "node-id") == "wex" and flag(create, "accelerator-type") == "v5p-64"
    assert flag(create, "runtime-version") == "v2-alpha-tpuv5" and "--spot" in create
    assert flag(create, "zone") == "us-east5-a" and flag(create, "project") == "my-proj"
    assert describe[3:6] == ["queued-resources", "describe", "wex"] and flag(describe, "format") == "value(state.state)"


@pytest.mark.parametrize(
    "generation, topology, gcloud_type, runtime",
    [
        ("v4", "2x2x4", "v4", "tpu-ubuntu2204-base"),
        ("v5p", "2x4x4", "v5p", "v2-alpha-tpuv5"),
        ("v5e", "4x4", "v5litepod", "v2-alpha-tpuv5-lite"),
        ("v6e", "4x8", "v6e", "v2-alpha-tpuv6e"),
    ],
)
def test_create_by_topology_for_each_generation(generation, topology, gcloud_type, runtime):
    [(_, create)] = dry_run("create", "s", *WHERE, "--generation", generation, "--topology", topology, "--no-wait")
    assert flag(create, "type") == gcloud_type and flag(create, "topology") == topology
    assert flag(create, "runtime-version") == runtime
    [(_, direct)] = dry_run("create", "s", *WHERE, "--generation", generation, "--topology", topology, "--direct")
    assert direct[:6] == ["gcloud", "compute", "tpus", "tpu-vm", "create", "s"] and flag(direct, "version") == runtime


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--accelerator", "v5p_64"], "expected one of v4-N, v5litepod-N, v5p-N, v6e-N"),
        (["--generation", "v5e", "--topology", "2x2x2"], "v5e slices are 2-D, e.g. 2x2"),
        (["--generation", "v5p", "--topology", "4x4"], "v5p slices are 3-D, e.g. 2x2x2"),
        (["--accelerator", "v4-8", "--generation", "v4", "--topology", "2x2x1"], "give either --accelerator"),
    ],
)
def test_create_rejects_bad_shapes_naming_the_flag(argv, message):
    result = tpu("create", "s", *WHERE, *argv, check=False)
    assert result.returncode == 2 and message in result.stderr and not result.stdout


def small_checkout(root: Path) -> Path:
    """A checkout with a venv, a run directory and pycache that the pack step must leave out."""
    for rel in (
        "pyproject.toml",
        "configs/a.yaml",
        "jaxseeker/__init__.py",
        ".venv/bin/python",
        "runs/x/metrics.jsonl",
        "jaxseeker/__pycache__/x.pyc",
    ):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("x")
    return root


def test_setup_installs_on_every_worker_and_packs_the_checkout(tmp_path):
    repo = small_checkout(tmp_path / "repo")
    steps = dry_run(
        "setup",
        "wex",
        *WHERE,
        "--repo",
        str(repo),
        "--env-file",
        "keys.env",
        "--gcs-copy",
        "gs://b/data=runs/webexplorer",
        "--hf-model",
        "Qwen/Qwen3-8B=checkpoints/Qwen3-8B",
    )
    assert [s for s, _ in steps] == [
        "pack",
        "copy",
        "install",
        "copy env file",
        "fetch gs://b/data",
        "download Qwen/Qwen3-8B",
        "check devices",
    ]
    cmds = dict(steps)
    for stage, cmd in steps[1:]:
        assert flag(cmd, "worker") == "all" and flag(cmd, "zone") == "us-east5-a", stage
    assert cmds["copy"][4:7] == ["scp", cmds["pack"][2], "wex:jaxseeker-src.tar.gz"]
    install = remote(cmds["install"])
    assert "python3.11 -m venv .venv" in install and '.venv/bin/pip install -q -e . "jax[tpu]==' in install
    assert cmds["copy env file"][5:7] == ["keys.env", "wex:jaxseeker/.env"]
    assert "gcloud storage cp -r gs://b/data runs/webexplorer" in remote(cmds["fetch gs://b/data"])
    assert ".venv/bin/hf download Qwen/Qwen3-8B --local-dir checkpoints/Qwen3-8B" in remote(
        cmds["download Qwen/Qwen3-8B"]
    )
    for stage in ("install", "fetch gs://b/data", "download Qwen/Qwen3-8B", "check devices"):
        subprocess.run(["bash", "-n", "-c", remote(cmds[stage])], check=True)  # valid bash

    pack = [str(tmp_path / "src.tar.gz") if a == cmds["pack"][2] else a for a in cmds["pack"]]
    subprocess.run(pack, check=True)
    with tarfile.open(tmp_path / "src.tar.gz") as tar:
        names = {n.removeprefix("./") for n in tar.getnames()}
    assert {"pyproject.toml", "configs/a.yaml", "jaxseeker/__init__.py"} <= names
    assert not any(n.startswith((".venv", "runs")) or "__pycache__" in n for n in names)


def test_setup_rejects_a_fetch_that_is_not_gcs():
    result = tpu("setup", "s", *WHERE, "--gcs-copy", "/data=data", check=False)
    assert result.returncode == 2 and "the source must be a gs:// path" in result.stderr


@pytest.mark.parametrize(
    "command, config, section",
    [("sft", "configs/webexplorer_qwen3-8b_sft.yaml", "train"), ("rl", "configs/webexplorer_qwen3-8b_grpo.yaml", "rl")],
)
def test_launch_runs_one_command_on_all_workers_with_gcs_checkpoints(command, config, section):
    (stage, cmd), (wait, wait_cmd), (state, describe) = dry_run(
        "launch", "wex", *WHERE, "--bucket", "gs://my-bucket/js/", "--run", "wex-1", "--", command, "--config", config
    )
    assert (stage, wait, state) == ("launch", "wait for the job", "slice state")
    assert flag(cmd, "worker") == "all" and flag(wait_cmd, "worker") == "all"
    script = remote(cmd)
    expected = (
        f".venv/bin/jaxseeker {command} --config {config} "
        f"--set {section}.out_dir=runs/wex-1 --set {section}.checkpoint_dir=gs://my-bucket/js/wex-1/checkpoints"
    )
    assert expected in script and "--resume" not in script  # a relaunch after a lost slice adds it
    assert "gcloud storage rsync -r runs/wex-1 gs://my-bucket/js/wex-1/out" in script
    assert re.search(r"gcloud storage cp ~/wex-1.log gs://my-bucket/js/wex-1/logs/\d{8}-\d{6}/worker-\$JAX_", script)
    assert script.startswith("rm -f ~/wex-1.status; ")
    assert script.endswith("> ~/wex-1.log 2>&1 < /dev/null & echo $! > ~/wex-1.pid")
    assert "jaxseeker-exit=" in remote(wait_cmd)
    assert describe[3:6] == ["queued-resources", "describe", "wex"]


def test_launch_checks_and_plans_the_command_here_before_any_gcloud_call():
    out = tpu(
        "launch", "wex", *WHERE, "--accelerator", "v6e-64", "--bucket", "gs://b", "--run", "r", "--",
        "sft", "--config", "configs/webexplorer_qwen3-8b_sft.yaml",
    ).stdout  # fmt: skip
    assert "# check: the plan on 64 v6e chips" in out
    assert "#   mesh data=1,fsdp=32,tensor=1,expert=1,context=2 = 64 × TPU v6e" in out
    assert re.search(r"^#   fits \(90% HBM\) +yes$", out, flags=re.MULTILINE)


@pytest.mark.parametrize(
    "argv, message",
    [
        (
            ["--", "sfft", "--config", "configs/nope.yaml"],
            "jaxseeker: error: unknown command 'sfft' (did you mean 'sft'?)",
        ),
        (["--", "sft", "--config", "configs/nope.yaml"], "jaxseeker sft: configs/nope.yaml: no such file"),
        (
            ["--", "sft", "--config", "configs/webexplorer_qwen3-8b_sft.yaml", "--set", "optimizer.lr=fast"],
            "configs/webexplorer_qwen3-8b_sft.yaml: optimizer.lr: expected float",
        ),
        (  # 16 TensorCores are 8 chips; the recipe's mesh is fsdp 32 × context 2
            ["--accelerator", "v5p-16", "--", "sft", "--config", "configs/webexplorer_qwen3-8b_sft.yaml"],
            "needs 64 devices, found 8",
        ),
        (
            ["--", "sft", "--config", "demo"],
            "jaxseeker/configs/demo.yaml is a recipe for `jaxseeker pipeline`",
        ),
        (
            ["--", "sft", "--config", "configs/webexplorer_qwen3-8b_sft.yaml", "--set", "data.seq_len=1048576"],
            "webexplorer_qwen3-8b_sft does not fit 64 × TPU v5p: sft (update); the planner suggests mesh",
        ),
    ],
)
def test_launch_refuses_in_one_line_what_would_fail_on_the_slice(argv, message):
    result = tpu("launch", "wex", *WHERE, "--bucket", "gs://b", "--run", "r", *argv, check=False)
    assert result.returncode == 2, result
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("tpu.py launch: ") and message in line, line
    assert "# launch" not in result.stdout and "gcloud" not in result.stdout


def test_launch_force_goes_on_when_the_plan_does_not_fit():
    out = tpu(
        "launch", "wex", *WHERE, "--force", "--bucket", "gs://b", "--run", "r", "--",
        "sft", "--config", "configs/webexplorer_qwen3-8b_sft.yaml", "--set", "data.seq_len=1048576",
    ).stdout  # fmt: skip
    assert "# --force: webexplorer_qwen3-8b_sft does not fit 64 × TPU v5p" in out
    assert "\n# launch\n" in out and "\n# wait for the job\n" in out


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--bucket", "/local/dir", "--run", "r", "--", "sft"], "expected a gs:// path"),
        (["--bucket", "gs://b", "--run", "a b", "--", "sft"], "--run 'a b'"),
        (["--bucket", "gs://b", "--run", "r"], "give the jaxseeker command after --"),
        (["--bucket", "gs://b", "--run", "r", "--", "sft", "--dry-run"], "put it before `--`"),
    ],
)
def test_launch_rejects_bad_arguments(argv, message):
    result = tpu("launch", "s", *WHERE, *argv, check=False)
    assert result.returncode == 2 and message in result.stderr


def test_setup_installs_the_jax_of_this_environment():
    import jax

    assert tpu_script.JAX_TPU == f"jax[tpu]=={jax.__version__}"  # the pin moves with the environment


def stub(path: Path, body: str) -> None:
    """An executable bash script at `path`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/bash\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)


def test_launch_script_starts_jaxseeker_as_one_process_of_the_slice(tmp_path):
    [(_, cmd)] = dry_run(
        "launch", "wex", *WHERE, "--detach", "--bucket", "gs://b", "--run", "r1", "--",
        "sft", "--config", "configs/webexplorer_qwen3-8b_sft.yaml",
    )  # fmt: skip
    home, bin_dir = tmp_path / "home", tmp_path / "bin"
    stub(
        bin_dir / "curl",
        'case "$*" in\n'
        '  *worker-network-endpoints*) echo -n "n0:1:10.0.0.5,n1:2:10.0.0.6,n2:3:10.0.0.7" ;;\n'
        '  *agent-worker-number*) echo -n "$FAKE_WORKER" ;;\nesac\n',
    )
    stub(bin_dir / "gcloud", f'echo "$*" >> {tmp_path}/gcloud.txt\n')
    stub(
        home / "jaxseeker" / ".venv" / "bin" / "jaxseeker",
        'echo "$JAX_COORDINATOR_ADDRESS $JAX_NUM_PROCESSES $JAX_PROCESS_ID $HF_TOKEN_SET $*"\nexit 3\n',
    )
    (home / "jaxseeker" / ".env").write_text("HF_TOKEN_SET=yes\n")
    (home / "r1.status").write_text("0\n")  # a previous launch's: removed before the job starts
    env = dict(os.environ, HOME=str(home), PATH=f"{bin_dir}:{os.environ['PATH']}", FAKE_WORKER="0")
    subprocess.run(["bash", "-c", remote(cmd)], env=env, check=True, cwd=tmp_path)
    log, pid, status = home / "r1.log", home / "r1.pid", home / "r1.status"
    deadline = time.monotonic() + 120
    # The job runs detached; it writes its exit status last, after the copies: wait for the whole line.
    while not (status.exists() and status.read_text().endswith("\n")):
        assert time.monotonic() < deadline, "the detached job did not end in 120 s; log: " + (
            log.read_text() if log.exists() else "none"
        )
        time.sleep(0.1)
    assert status.read_text() == "3\n"  # jaxseeker's exit status, for the launcher's wait script
    assert pid.read_text().strip().isdigit()
    assert log.read_text().split() == [
        "10.0.0.5:8476",
        "3",
        "0",
        "yes",
        "sft",
        "--config",
        "configs/webexplorer_qwen3-8b_sft.yaml",
        "--set",
        "train.out_dir=runs/r1",
        "--set",
        "train.checkpoint_dir=gs://b/r1/checkpoints",
    ]
    copy_log, rsync = (tmp_path / "gcloud.txt").read_text().splitlines()  # worker 0: its log, then the out dir
    assert re.fullmatch(rf"storage cp {home}/r1.log gs://b/r1/logs/\d{{8}}-\d{{6}}/worker-0.log", copy_log)
    assert rsync == "storage rsync -r runs/r1 gs://b/r1/out"


def test_logs_stop_ssh_and_delete():
    [(_, logs)] = dry_run("logs", "wex", *WHERE, "--run", "r1")
    assert flag(logs, "worker") == "0" and remote(logs) == "tail -n 100 -F ~/r1.log"
    [(_, stop)] = dry_run("stop", "wex", *WHERE, "--run", "r1")
    assert flag(stop, "worker") == "all" and "kill -- -$(cat ~/r1.pid)" in remote(stop)
    [(_, ssh)] = dry_run("ssh", "wex", *WHERE, "--worker", "3", "--", "ls", "runs")
    assert flag(ssh, "worker") == "3" and remote(ssh) == "cd ~/jaxseeker && ls runs"
    [(_, delete)] = dry_run("delete", "wex", *WHERE)
    assert delete[:6] == ["gcloud", "compute", "tpus", "queued-resources", "delete", "wex"]
    assert "--force" in delete and "--quiet" in delete
    [(_, direct)] = dry_run("delete", "wex", *WHERE, "--direct")
    assert direct[3:6] == ["tpu-vm", "delete", "wex"]


def test_gpu_check_dry_run_prints_every_stage():
    import jax

    out = subprocess.run(
        ["bash", str(GPU_CHECK), "--dry-run"], capture_output=True, text=True, check=True, cwd=ROOT
    ).stdout
    stages = [line[2:] for line in out.splitlines() if line.startswith("# ")]
    assert stages == [
        "install",
        "devices",
        "parity",
        "attention",
        "sft data",
        "sft xla",
        "sft cudnn",
        "rl toy",
        "rl",
        "bench generate",
        "bench sft",
        "table",
    ]
    assert f"'jax[cuda12]=={jax.__version__}'" in out  # the pin moves with the environment the tests run in
    blocks = re.split(r"^# (.+)\n", out, flags=re.MULTILINE)  # [preamble, stage, its command, stage, …]
    commands = dict(zip(blocks[1::2], (b.strip() for b in blocks[2::2])))
    assert "--set model.attention_impl=cudnn --set model.compute_dtype=bfloat16" in out
    for stage in ("sft xla", "sft cudnn", "rl"):  # every local GPU in one mesh
        assert "--set mesh.fsdp=-1" in commands[stage], stage
    rl = shlex.split(commands["rl"])
    assert rl[1:4] == ["rl", "--config", "rl_tiny"] and "rl.questions=[runs/gpu_check/rl_toy/questions.jsonl]" in rl
    assert "write_toy('runs/gpu_check/rl_toy')" in commands["rl toy"]
    no_install = subprocess.run(
        ["bash", str(GPU_CHECK), "--dry-run", "--no-install"], capture_output=True, text=True, check=True, cwd=ROOT
    ).stdout
    assert "# install" not in no_install and "# sft cudnn" in no_install


def test_gpu_check_trains_on_what_its_pipeline_stage_writes(tmp_path):
    """The "sft data" stage's pipeline writes the trajectories and the tokenizer its SFT recipe reads, and the
    recipe's vocabulary is that tokenizer's."""
    from jaxseeker.cli import main
    from jaxseeker.data import load_tokenizer
    from jaxseeker.train.recipe import load_yaml

    env = {**os.environ, "OUT": str(tmp_path)}
    out = subprocess.run(
        ["bash", str(GPU_CHECK), "--dry-run"], capture_output=True, text=True, check=True, cwd=ROOT, env=env
    ).stdout
    command = next(line for line in out.splitlines() if "pipeline --quick" in line)
    recipe = load_yaml(out.split("<<'EOF'\n", 1)[1].split("\nEOF", 1)[0])
    assert main(shlex.split(command.split("&&")[0])[1:]) == 0  # after $VENV/bin/jaxseeker
    assert all(Path(f).is_file() for f in recipe["train"]["train_files"])
    assert len(load_tokenizer(recipe["train"]["tokenizer"])) == recipe["model"]["vocab_size"]
