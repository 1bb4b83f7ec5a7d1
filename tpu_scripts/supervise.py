"""What `tpu.py launch` does when a launched job ends: the decision, from what the workers and gcloud said.

Pure functions, no gcloud: `tpu.py` runs the commands and feeds their output here. A job ends in one of three ways
the launcher can see: the workers report its exit status (a line `jaxseeker-exit=N` from each worker's wait
script), the ssh session ends without one (the connection dropped, or the VMs went away), or the slice's state says
it is gone (a spot slice preempted, a queued resource suspended or deleted). A job that failed on a healthy slice is
a bug or a bad input: it is not retried. A job whose step metrics stopped advancing (`jaxseeker-hang=N`: none for N
minutes) is reported with the end of its log and left running.
"""

from __future__ import annotations

import re

EXIT_MARKER = "jaxseeker-exit="
HANG_MARKER = "jaxseeker-hang="  # a worker's wait script: the run's metrics stopped advancing (minutes), then its log
HEALTHY = frozenset({"ACTIVE", "READY"})  # a queued resource's / a TPU VM's state while it runs
# The slice (or its capacity) is gone: a new one must be created, the run resumed from its checkpoints.
LOST = frozenset(
    {"PREEMPTED", "TERMINATED", "STOPPED", "STOPPING", "SUSPENDED", "SUSPENDING", "FAILED", "DELETING", "NOT_FOUND"}
)
MAX_CHECKS = 10  # looks at a slice in another state (restarting, unreachable) before giving up on it
KILLED_CHECKS = 3  # looks at a healthy slice after a killed job (a preemption not yet visible, or `tpu.py stop`)
KILLED = 137  # the status of a job whose processes are gone without one (`jaxseeker-exit=killed`): SIGKILL's

DONE, FAIL, WAIT, RECREATE, GIVE_UP = "done", "fail", "wait", "recreate", "give up"


def job_status(ssh_returncode: int, stdout: str) -> int | None:
    """The job's exit status from the wait script's output on every worker: the first non-zero one (KILLED for a
    job gone without a status), 0 when the session succeeded and every worker said 0, None when no worker said (the
    session ended without an answer)."""
    found = re.findall(rf"^{EXIT_MARKER}(\d+|killed)\s*$", stdout, flags=re.MULTILINE)
    codes = [KILLED if c == "killed" else int(c) for c in found]
    failed = [c for c in codes if c != 0]
    if failed:
        return failed[0]
    return 0 if codes and ssh_returncode == 0 else None


def hang_report(stdout: str) -> tuple[float, str] | None:
    """(minutes, the log lines that follow) when a worker's wait script reported that the run's step metrics had
    not advanced for that long; None otherwise."""
    match = re.search(rf"^{HANG_MARKER}([\d.]+)\s*$", stdout, flags=re.MULTILINE)
    if not match:
        return None
    log = stdout[match.end() :].split(EXIT_MARKER, 1)[0]
    return float(match.group(1)), log.strip("\n")


def slice_state(returncode: int, stdout: str, stderr: str) -> str:
    """The state `gcloud … describe --format=value(state…)` printed, NOT_FOUND when the slice does not exist, or
    UNKNOWN when the command failed otherwise (e.g. no network on this side)."""
    if returncode == 0 and stdout.strip():
        return stdout.strip().split()[0].upper()
    if re.search(r"NOT_FOUND|not found", stderr):
        return "NOT_FOUND"
    return "UNKNOWN"


def next_action(
    exit_code: int | None, state: str, *, retries: int, max_retries: int, checks: int, can_recreate: bool
) -> str:
    """What to do after a job ended with `exit_code` (None: not known) on a slice now in `state`.

    retries: slices recreated so far for this run (at most `max_retries`). checks: looks at the slice since the
    job last ended without a clear verdict. can_recreate: the launcher knows the slice's shape.
    Returns DONE (the job succeeded), FAIL (it failed on a healthy slice: not retried), WAIT (look again after a
    pause: the ssh session dropped while the slice runs, or the job was killed by a signal and the slice's state has
    not caught up with a preemption yet), RECREATE (delete, create and set up the slice again, then relaunch the
    run with `--resume`) or GIVE_UP (retries or checks used up, or the slice is lost and cannot be recreated)."""
    if exit_code == 0:
        return DONE
    if state in LOST:
        return RECREATE if can_recreate and retries < max_retries else GIVE_UP
    if state not in HEALTHY or exit_code is None:
        return WAIT if checks < MAX_CHECKS else GIVE_UP
    if exit_code > 128:  # SIGTERM (143) / SIGKILL (137): a preemption's signals, or `tpu.py stop`
        return WAIT if checks < KILLED_CHECKS else FAIL
    return FAIL
