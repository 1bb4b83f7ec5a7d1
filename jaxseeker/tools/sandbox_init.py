"""The `unshare` back-end of the python tool's sandbox: one command in new namespaces, set up by `unshare(2)`.

Run as a script (`python -I -S sandbox_init.py SPEC`): it imports nothing but os, sys, marshal and ctypes, so it
starts fast; SPEC is a dict in hex-encoded `marshal` form (see `jaxseeker.tools.sandbox`). It does what bubblewrap
does for the other back-end, in three processes:

1. the launcher (this process, on the host) forks the child and writes its uid/gid maps: the sandbox runs as uid
   and gid 1000, which are 65534 (nobody) on the host when the launcher runs as root (a root-owned sandbox would
   escape RLIMIT_NPROC, which the kernel never applies to uid 0), else the caller's own ids;
2. the child unshares the user, mount, PID, network, IPC, UTS and cgroup namespaces, writes the host pid of the
   next process to INFO_FD, then waits for it and exits with its status (128 + signal when it was killed);
3. the init, PID 1 of the new PID namespace, builds the file system on a fresh tmpfs (read-only binds of the
   Python installation, a tmpfs scratch directory, a new /proc, /dev with null, zero, full, random and urandom),
   pivots into it, sets max_user_namespaces to 0 (no nested namespaces), becomes uid 1000, sets no_new_privs and
   the seccomp filter read from SECCOMP_FD, starts the command as PID 2 (it execs without capabilities, with the
   given environment), drops its own capabilities and reaps processes until the command ends.

The network namespace has only a loopback interface, left down. When PID 1 exits, the kernel kills everything
else in its namespace; each process also dies with its parent (PR_SET_PDEATHSIG), so killing the launcher or the
init ends the whole run. A failure to set up prints one line starting "sandbox:" and exits with status 125.
"""

from __future__ import annotations

import ctypes
import marshal
import os
import sys

SETUP_FAILED = 125
SANDBOX_ID = 1000
NOBODY = 65534
CLONE = {
    "user": 0x10000000,
    "mount": 0x00020000,
    "pid": 0x20000000,
    "net": 0x40000000,
    "ipc": 0x08000000,
    "uts": 0x04000000,
    "cgroup": 0x02000000,
}
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT = 1, 2, 4, 8, 32
MS_NOATIME, MS_NODIRATIME, MS_BIND, MS_REC, MS_PRIVATE = 1024, 2048, 4096, 16384, 1 << 18
MS_RELATIME, MS_STRICTATIME = 1 << 21, 1 << 24
MNT_DETACH = 2
SIGKILL = 9
PR_SET_PDEATHSIG, PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 1, 24, 38, 22, 2
SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41}[os.uname().machine]
DEVICES = ("null", "zero", "full", "random", "urandom")
# per-mount options a bind in a user namespace must keep when it is remounted read-only (the kernel locks them)
KEPT_OPTIONS = {
    "nosuid": MS_NOSUID,
    "nodev": MS_NODEV,
    "noexec": MS_NOEXEC,
    "noatime": MS_NOATIME,
    "nodiratime": MS_NODIRATIME,
    "relatime": MS_RELATIME,
}

_libc = ctypes.CDLL(None, use_errno=True)


class SetupError(Exception):
    """A step of the set-up that failed; the message names it."""


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise SetupError(f"{what}: {os.strerror(err)}")


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    enc = [None if s is None else s.encode() for s in (source, target, fstype, data)]
    _check(_libc.mount(enc[0], enc[1], enc[2], ctypes.c_ulong(flags), enc[3]), f"mount {source} on {target}")


def _die_with_parent(parent: int) -> None:
    _check(_libc.prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0), "prctl(PR_SET_PDEATHSIG)")
    if os.getppid() != parent:  # the parent died before the prctl
        os._exit(SETUP_FAILED)


def _unescape(field: str) -> str:
    """A mountinfo field with its octal escapes (\\040 for a space) decoded."""
    parts = field.split("\\")
    return parts[0] + "".join(chr(int(p[:3], 8)) + p[3:] for p in parts[1:])


def _mount_points(under: str, root: str) -> list[tuple[str, set[str]]]:
    """Mount points at or below `under` with their per-mount options, from the mountinfo of `root`/proc."""
    found = []
    with open(f"{root}/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            point = _unescape(fields[4])
            if point == under or point.startswith(under.rstrip("/") + "/"):
                found.append((point, set(fields[5].split(","))))
    return found


def _bind_read_only(source: str, target: str, root: str) -> None:
    _mount(source, target, None, MS_BIND | MS_REC)
    for point, options in _mount_points(target, root):
        flags = MS_BIND | MS_REMOUNT | MS_RDONLY
        flags |= sum(bit for name, bit in KEPT_OPTIONS.items() if name in options)
        if not options & {"noatime", "relatime"}:
            flags |= MS_STRICTATIME
        _mount(None, point, None, flags)


def _make_path(path: str, *, directory: bool) -> str:
    os.makedirs(path if directory else os.path.dirname(path), exist_ok=True)
    if not directory and not os.path.exists(path):
        open(path, "w").close()
    return path


def open_sources(spec: dict) -> dict[str, int]:
    """O_PATH descriptors of every bind source, opened with the launcher's own file access (root's, when it is root):
    the sandbox's uid may not be able to reach them by path (a Python under /root), but it can bind them by fd."""
    paths = [*spec["binds"], *(f"/dev/{name}" for name in DEVICES)]
    return {path: os.open(path, os.O_PATH | os.O_CLOEXEC) for path in paths}


def build_root(spec: dict, sources: dict[str, int]) -> None:
    """The sandbox's file system on a fresh tmpfs, and pivot_root into it (as bwrap does it).

    A first tmpfs at /tmp becomes the root with the host's root at /oldroot; the new tree is built in /newroot
    (binds from the descriptors of `open_sources`, through the new /proc), then pivoted into, and the old root is
    detached.
    """
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    _mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755")
    for name in ("newroot", "oldroot"):
        os.mkdir(f"/tmp/{name}")
    _mount("tmpfs", "/tmp/newroot", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755")
    _check(_libc.syscall(SYS_PIVOT_ROOT, b"/tmp", b"/tmp/oldroot"), "pivot_root")
    os.chdir("/")
    new, old = "/newroot", "/oldroot"
    _mount("proc", _make_path(new + "/proc", directory=True), "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    fd_path = {path: f"{new}/proc/self/fd/{fd}" for path, fd in sources.items()}
    for path in spec["binds"]:
        _bind_read_only(fd_path[path], _make_path(new + path, directory=os.path.isdir(fd_path[path])), new)
    for link, target in spec["symlinks"]:
        os.symlink(target, new + link)
    _mount("tmpfs", _make_path(new + "/dev", directory=True), "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=0755")
    for name in DEVICES:
        _mount(fd_path[f"/dev/{name}"], _make_path(f"{new}/dev/{name}", directory=False), None, MS_BIND)
    for name, target in (
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
    ):
        os.symlink(target, f"{new}/dev/{name}")
    _mount(None, new + "/dev", None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NOEXEC)
    scratch = _make_path(new + spec["scratch"], directory=True)
    _mount("tmpfs", scratch, "tmpfs", MS_NOSUID | MS_NODEV, f"mode=1777,size={spec['scratch_bytes']}")
    if not os.path.exists(new + "/tmp"):  # a bind under /tmp (a venv there) made it a directory: TMPDIR is the scratch
        os.symlink(spec["scratch"], new + "/tmp")
    _check(_libc.umount2(old.encode(), MNT_DETACH), "umount the host's root")
    os.chdir(new)
    _check(_libc.syscall(SYS_PIVOT_ROOT, b".", b"."), "pivot_root")
    _check(_libc.umount2(b".", MNT_DETACH), "umount the first tmpfs")
    os.chdir("/")
    _mount(None, "/", None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)


def become_sandbox_user(spec: dict) -> None:
    """uid and gid 1000, no supplementary groups. The capabilities in the new user namespace stay until the exec:
    uid 0 is not mapped in it, so no uid counts as its root, and the exec of a non-root uid drops them all."""
    if spec["host_root"]:  # the launcher left setgroups allowed: drop root's supplementary groups
        os.setgroups([])
    os.setresgid(SANDBOX_ID, SANDBOX_ID, SANDBOX_ID)
    os.setresuid(SANDBOX_ID, SANDBOX_ID, SANDBOX_ID)


def lock_down(spec: dict) -> None:
    """No nested user namespaces, an empty capability bounding set, no_new_privs, then the seccomp filter."""
    with open("/proc/sys/user/max_user_namespaces", "w") as f:
        f.write("0")
    with open("/proc/sys/kernel/cap_last_cap") as f:
        for cap in range(int(f.read()) + 1):
            _check(_libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0), f"prctl(PR_CAPBSET_DROP, {cap})")
    _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(PR_SET_NO_NEW_PRIVS)")
    program = os.read(spec["seccomp_fd"], 65536)

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_char_p)]

    fprog = SockFprog(len(program) // 8, program)
    _check(_libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0), "seccomp")


def drop_capabilities() -> None:
    """Empty effective, permitted and inheritable capability sets (capset(2), version 3)."""

    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    class Data(ctypes.Structure):
        _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]

    _check(_libc.capset(ctypes.byref(Header(0x20080522, 0)), (Data * 2)()), "capset")


def command(spec: dict) -> None:
    """PID 2: the command, in the scratch directory, with only the standard streams open."""
    os.closerange(3, os.sysconf("SC_OPEN_MAX"))
    os.chdir(spec["scratch"])
    os.execve(spec["argv"][0], spec["argv"], spec["env"])


def init(spec: dict, go: int) -> None:
    """PID 1 of the sandbox: build it, start the command as PID 2, reap every process until the command ends,
    then exit with its status (PID 1 ignores signals it has no handler for, so the command must not be it)."""
    _check(_libc.prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0), "prctl(PR_SET_PDEATHSIG)")
    if os.read(go, 1) != b"g":  # the child died before the prctl (its pipe closed), or could not report this pid
        os._exit(SETUP_FAILED)
    os.close(go)
    os.setsid()
    _check(_libc.sethostname(b"sandbox", 7), "sethostname")
    sources = open_sources(spec)
    become_sandbox_user(spec)
    build_root(spec, sources)
    lock_down(spec)
    pid = os.fork()
    if pid == 0:
        _run_step(command, spec)
    drop_capabilities()
    os.closerange(3, os.sysconf("SC_OPEN_MAX"))
    while True:
        done, status = os.wait()
        if done == pid:
            os._exit(os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status))


def child(spec: dict, launcher: int, ready: int, mapped: int) -> None:
    """Unshare the namespaces, let the launcher map the ids, fork PID 1, report its pid and wait for it."""
    _die_with_parent(launcher)
    _check(_libc.unshare(sum(CLONE.values())), "unshare(user, mount, pid, net, ipc, uts, cgroup)")
    os.write(ready, b"u")
    if os.read(mapped, 1) != b"m":
        raise SetupError("the launcher could not write the uid/gid maps")
    go_r, go_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(go_w)
        _run_step(init, spec, go_r)
    os.close(go_r)
    os.write(spec["info_fd"], f"{pid}\n".encode())
    os.close(spec["info_fd"])
    os.write(go_w, b"g")
    os.close(go_w)
    _, status = os.waitpid(pid, 0)
    os._exit(os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status))


def write_maps(pid: int, host_root: bool) -> None:
    """uid and gid 1000 inside = nobody (when the launcher is root) or the launcher's own ids outside."""
    uid, gid = (NOBODY, NOBODY) if host_root else (os.getuid(), os.getgid())
    if not host_root:  # an unprivileged process may map its gid only with setgroups denied
        with open(f"/proc/{pid}/setgroups", "w") as f:
            f.write("deny")
    for name, outside in (("uid_map", uid), ("gid_map", gid)):
        with open(f"/proc/{pid}/{name}", "w") as f:
            f.write(f"{SANDBOX_ID} {outside} 1\n")


def _run_step(step, *args) -> None:  # noqa: ANN001 - a forked process: report a failure on one line and exit
    try:
        step(*args)
    except (SetupError, OSError) as exc:
        os.write(2, f"sandbox: {exc}\n".encode(errors="replace"))
    os._exit(SETUP_FAILED)


def main() -> None:
    """The launcher: fork the child, write its maps, exit with its status."""
    spec = marshal.loads(bytes.fromhex(sys.argv[1]))
    spec["host_root"] = os.geteuid() == 0
    _check(_libc.prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0), "prctl(PR_SET_PDEATHSIG)")
    ready_r, ready_w = os.pipe()
    mapped_r, mapped_w = os.pipe()
    me = os.getpid()
    pid = os.fork()
    if pid == 0:
        os.close(ready_r)
        os.close(mapped_w)
        _run_step(child, spec, me, ready_w, mapped_r)
    os.close(ready_w)
    os.close(mapped_r)
    os.close(spec["info_fd"])
    if os.read(ready_r, 1) == b"u":
        try:
            write_maps(pid, spec["host_root"])
            os.write(mapped_w, b"m")
        except OSError as exc:
            os.write(2, f"sandbox: writing the uid/gid maps: {exc}\n".encode(errors="replace"))
    os.close(mapped_w)
    _, status = os.waitpid(pid, 0)
    os._exit(os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status))


if __name__ == "__main__":
    main()
