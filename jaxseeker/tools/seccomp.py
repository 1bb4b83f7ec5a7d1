"""The seccomp filter of the python tool's sandbox: it closes the holes that namespaces leave open.

Namespaces do not cover three things a run could reach:

- the kernel keyrings: a process inherits its parent's session keyring through every namespace (bwrap included)
  and may read the keys it holds there, so `keyctl`, `add_key` and `request_key` fail with EPERM;
- socket families outside the network namespace's reach: AF_VSOCK talks to the hypervisor host of a VM whatever
  the namespace, so `socket()` is allowed for AF_UNIX, AF_INET, AF_INET6 and AF_NETLINK only (EAFNOSUPPORT else);
- io_uring, which opens sockets without calling `socket()` (and is a frequent kernel attack surface): its three
  calls fail with EPERM;
- memory that counts against no process's RLIMIT_AS: SysV shared memory, semaphore and message queue sets and
  memfds live in the kernel until removed or closed, so `shmget`, `semget`, `msgget`, `memfd_create` and
  `memfd_secret` fail with EPERM. Limits written in the run's own IPC namespace (kernel.shmmax, shmall, shmmni)
  would not hold: the namespace's sysctls belong to the run's uid, which could raise them again.

Every other call is allowed; calls of another architecture (32-bit `int 0x80`, x32) kill the process, so the numbers
below cannot be bypassed. The filter is written here as classic BPF rather than through libseccomp: libseccomp's
Python bindings are not on PyPI (Debian ships them for its own Python only), and the program is 25 instructions.
"""

from __future__ import annotations

import errno
import platform
import struct

# struct seccomp_data: int nr; u32 arch; u64 instruction_pointer; u64 args[6]
_NR, _ARCH, _ARG0 = 0, 4, 16  # byte offsets (args[0]'s low half on a little-endian machine)
_LD_ABS, _JEQ, _JGE, _RET = 0x20, 0x15, 0x35, 0x06  # BPF_LD|W|ABS, BPF_JMP|JEQ|K, BPF_JMP|JGE|K, BPF_RET|K
_KILL_PROCESS, _ALLOW, _ERRNO = 0x80000000, 0x7FFF0000, 0x00050000
_X32_BIT = 0x40000000

# machine → (AUDIT_ARCH_*, syscall numbers)
_ARCHES = {
    "x86_64": (
        0xC000003E,
        {
            "socket": 41,
            "add_key": 248,
            "request_key": 249,
            "keyctl": 250,
            "io_uring_setup": 425,
            "io_uring_enter": 426,
            "io_uring_register": 427,
            "shmget": 29,
            "semget": 64,
            "msgget": 68,
            "memfd_create": 319,
            "memfd_secret": 447,
        },
    ),
    "aarch64": (
        0xC00000B7,
        {
            "socket": 198,
            "add_key": 217,
            "request_key": 218,
            "keyctl": 219,
            "io_uring_setup": 425,
            "io_uring_enter": 426,
            "io_uring_register": 427,
            "shmget": 194,
            "semget": 190,
            "msgget": 186,
            "memfd_create": 279,
            "memfd_secret": 447,
        },
    ),
}
DENIED = (
    *("add_key", "request_key", "keyctl"),
    *("io_uring_setup", "io_uring_enter", "io_uring_register"),
    *("shmget", "semget", "msgget", "memfd_create", "memfd_secret"),
)
SOCKET_FAMILIES = (1, 2, 10, 16)  # AF_UNIX, AF_INET, AF_INET6, AF_NETLINK


def supported() -> bool:
    """Whether this machine's architecture has a filter here (x86-64 and arm64)."""
    return platform.machine() in _ARCHES


def program(machine: str | None = None) -> bytes:
    """The filter as an array of `struct sock_filter` (8 bytes each), what bwrap's --seccomp and PR_SET_SECCOMP read."""
    machine = machine or platform.machine()
    if machine not in _ARCHES:
        raise OSError(f"no seccomp filter for the {machine} architecture (x86_64 and aarch64 have one)")
    audit_arch, numbers = _ARCHES[machine]
    # An instruction is (code, jump-if-true label, jump-if-false label, k), None meaning the next one; a string is a
    # label for the instruction after it.
    listing: list[str | tuple[int, str | None, str | None, int]] = [
        (_LD_ABS, None, None, _ARCH),
        (_JEQ, None, "kill", audit_arch),
        (_LD_ABS, None, None, _NR),
        *([(_JGE, "kill", None, _X32_BIT)] if machine == "x86_64" else []),
        *[(_JEQ, "deny", None, numbers[name]) for name in DENIED],
        (_JEQ, None, "allow", numbers["socket"]),
        (_LD_ABS, None, None, _ARG0),
        *[(_JEQ, "allow", None, family) for family in SOCKET_FAMILIES],
        (_RET, None, None, _ERRNO | errno.EAFNOSUPPORT),
        "allow",
        (_RET, None, None, _ALLOW),
        "deny",
        (_RET, None, None, _ERRNO | errno.EPERM),
        "kill",
        (_RET, None, None, _KILL_PROCESS),
    ]
    labels: dict[str, int] = {}
    body: list[tuple[int, str | None, str | None, int]] = []
    for item in listing:
        if isinstance(item, str):
            labels[item] = len(body)
        else:
            body.append(item)

    def jump(label: str | None, at: int) -> int:
        return 0 if label is None else labels[label] - at - 1

    return b"".join(struct.pack("=HBBI", op, jump(jt, i), jump(jf, i), k) for i, (op, jt, jf, k) in enumerate(body))
