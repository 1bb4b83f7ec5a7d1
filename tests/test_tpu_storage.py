"""Storage for checkpoints beyond a worker's 100 GiB boot disk: `tpu.py create --data-disk SIZE` (a persistent disk
attached read-write and mounted, single-host slices) and `tpu.py setup --mount-bucket gs://…` (gcsfuse on every
worker). The gcloud commands come from `--dry-run`; the two mount scripts run under bash here with the system tools
they call (lsblk, sudo, gcsfuse, …) replaced by stubs on PATH that record their arguments."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest
from test_tpu_scripts import WHERE, dry_run, flag, remote, tpu


def test_a_data_disk_is_created_attached_and_mounted_on_a_single_host_slice():
    steps = dry_run("create", "s", *WHERE, "--accelerator", "v5p-8", "--data-disk", "500GB")
    assert [stage for stage, _ in steps] == ["create data disk", "create", "wait until ACTIVE", "mount data disk"]
    cmds = dict(steps)
    assert cmds["create data disk"][:5] == ["gcloud", "compute", "disks", "create", "s-data"]
    assert flag(cmds["create data disk"], "size") == "500GB" and flag(cmds["create data disk"], "type") == "pd-balanced"
    assert flag(cmds["create"], "data-disk") == "source=projects/my-proj/zones/us-east5-a/disks/s-data,mode=read-write"
    assert flag(cmds["mount data disk"], "worker") == "all"
    subprocess.run(["bash", "-n", "-c", remote(cmds["mount data disk"])], check=True)


def test_v6e_gets_hyperdisk_and_a_direct_vm_takes_the_disk_too():
    steps = dict(dry_run("create", "s", *WHERE, "--accelerator", "v6e-8", "--data-disk", "1TB", "--direct"))
    assert flag(steps["create data disk"], "type") == "hyperdisk-balanced"
    assert steps["create"][:6] == ["gcloud", "compute", "tpus", "tpu-vm", "create", "s"]
    assert flag(steps["create"], "data-disk").startswith("source=projects/my-proj/zones/us-east5-a/disks/s-data,")


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--accelerator", "v5p-64"], "this slice has 8 hosts and a read-write disk attaches to one VM"),
        (["--accelerator", "v6e-16"], "this slice has 4 hosts"),
        (["--accelerator", "v5p-8", "--no-wait"], "drop --no-wait"),
        (["--accelerator", "v5p-8", "--data-disk", "lots"], "expected a size such as 500GB"),
    ],
)
def test_data_disk_refusals_name_the_flag(argv, message):
    argv = ["--data-disk", "500GB", *argv] if "--data-disk" not in argv else argv
    result = tpu("create", "s", *WHERE, *argv, check=False)
    assert result.returncode == 2 and message in result.stderr and not result.stdout, result.stderr


def test_a_data_disk_needs_the_project_for_its_path():
    result = tpu("create", "s", "--zone", "z", "--accelerator", "v5p-8", "--data-disk", "500GB", check=False)
    assert result.returncode == 2 and "--data-disk needs --project" in result.stderr


def stub(bin_dir: Path, name: str, body: str) -> None:
    """An executable bash script `name` on `bin_dir` that appends its name and arguments to calls.txt first."""
    path = bin_dir / name
    path.write_text(f'#!/bin/bash\necho "{name} $*" >> {bin_dir}/calls.txt\n{body}\n')
    path.chmod(path.stat().st_mode | stat.S_IEXEC)


def run_script(tmp_path: Path, script: str, stubs: dict[str, str]) -> list[str]:
    """Run a worker's bash script with HOME in `tmp_path` and `stubs` on PATH; the stubs' calls, in order."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, body in stubs.items():
        stub(bin_dir, name, body)
    env = dict(os.environ, HOME=str(tmp_path / "home"), PATH=f"{bin_dir}:{os.environ['PATH']}", USER="me")
    subprocess.run(["bash", "-c", script], env=env, check=True, capture_output=True, text=True)
    return (bin_dir / "calls.txt").read_text().splitlines()


def test_the_mount_script_formats_and_mounts_the_one_unused_disk(tmp_path):
    [_, _, _, (_, mount)] = dry_run("create", "s", *WHERE, "--accelerator", "v5p-8", "--data-disk", "500GB")
    calls = run_script(
        tmp_path,
        remote(mount),
        {
            # the boot disk has partitions, the data disk none; a loop device is not a disk
            "lsblk": 'case "$*" in\n'
            '  "-ndpo NAME,TYPE") printf "/dev/sda disk\\n/dev/sdb disk\\n/dev/loop0 loop\\n" ;;\n'
            '  "-npo NAME /dev/sda") printf "/dev/sda\\n/dev/sda1\\n/dev/sda15\\n" ;;\n'
            '  *) echo "${@: -1}" ;;\nesac',
            "findmnt": "exit 1",  # nothing mounts /dev/sdb
            "mountpoint": "exit 1",  # the directory is not mounted yet
            "sudo": '[ "$1" = blkid ] && exit 2; exit 0',  # blkid: no file system yet
            "df": "",
        },
    )
    home = tmp_path / "home"
    sudo = [c for c in calls if c.startswith("sudo ")]
    assert sudo[0] == "sudo blkid /dev/sdb"
    assert sudo[1].startswith("sudo mkfs.ext4 ") and sudo[1].endswith(" /dev/sdb")
    assert sudo[2] == f"sudo mount -o discard,defaults /dev/sdb {home}/jaxseeker/checkpoints"
    assert sudo[3] == f"sudo chown me {home}/jaxseeker/checkpoints" and len(sudo) == 4
    assert (home / "jaxseeker" / "checkpoints").is_dir()


def test_setup_mounts_the_bucket_before_downloading_the_model_into_it_once(tmp_path):
    steps = dry_run(
        "setup", "s", *WHERE, "--mount-bucket", "gs://my-bucket/ckpt", "--hf-model", "Qwen/Qwen2.5-72B=checkpoints/72b"
    )
    names = [stage for stage, _ in steps]
    assert names[2:5] == ["install", "mount gs://my-bucket/ckpt", "download Qwen/Qwen2.5-72B"]
    cmds = dict(steps)
    assert flag(cmds["mount gs://my-bucket/ckpt"], "worker") == "all"
    assert flag(cmds["download Qwen/Qwen2.5-72B"], "worker") == "0"  # every worker reads it through the mount
    calls = run_script(
        tmp_path,
        remote(cmds["mount gs://my-bucket/ckpt"]),
        {"gcsfuse": "", "mountpoint": "exit 1", "df": "", "sudo": "", "curl": "", "lsb_release": "echo jammy"},
    )
    home = tmp_path / "home"
    assert f"gcsfuse --implicit-dirs --only-dir ckpt my-bucket {home}/jaxseeker/checkpoints" in calls
    assert not any(c.startswith(("sudo", "curl")) for c in calls)  # gcsfuse was there: nothing installed


def test_setup_installs_gcsfuse_where_it_is_missing():
    script = remote(dict(dry_run("setup", "s", *WHERE, "--mount-bucket", "gs://b"))["mount gs://b"])
    assert "command -v gcsfuse > /dev/null || (" in script and "sudo apt-get install -y -q gcsfuse" in script
    assert "gcsfuse --implicit-dirs b ~/jaxseeker/checkpoints" in script  # the whole bucket: no --only-dir


def test_a_bucket_mount_needs_a_gs_path():
    result = tpu("setup", "s", *WHERE, "--mount-bucket", "/data", check=False)
    assert result.returncode == 2 and "--mount-bucket '/data': expected gs://BUCKET" in result.stderr
