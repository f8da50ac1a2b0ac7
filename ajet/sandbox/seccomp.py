"""The system-call filter of `run_python` under bwrap: the kernel calls sandboxed code never needs, and
that are the usual ways from a namespace to the kernel or out of it, answer EPERM (ENOSYS for clone3,
so that glibc falls back to clone, whose flags the filter can read).

The filter is compiled by libseccomp (the library Docker, systemd and bubblewrap's own tests use,
Debian package `libseccomp2`, which apt itself depends on) through ctypes, exported as a classic BPF
program and handed to bwrap (`--seccomp FD`), which loads it just before it starts the interpreter.
Every other call is allowed: the namespaces, the read-only mounts and the rlimits (bwrap.py) stay the
walls; this takes away what a kernel bug would be reached through. The list follows Docker's default
profile, plus io_uring (its operations bypass the filter) and the new mount API.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import functools
import socket
import tempfile
from typing import IO

# Refused whatever their arguments.
DENIED: tuple[str, ...] = (
    # namespaces and mounts: no new walls to hide behind, no leaving these
    "unshare", "setns", "mount", "umount", "umount2", "pivot_root", "chroot", "fsopen", "fsconfig", "fsmount",
    "fspick", "move_mount", "open_tree", "mount_setattr",
    # other processes' memory and the kernel's own state
    "ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd", "perf_event_open", "bpf",
    "userfaultfd", "keyctl", "add_key", "request_key", "lookup_dcookie", "name_to_handle_at",
    "open_by_handle_at", "io_uring_setup", "io_uring_enter", "io_uring_register",
    # the machine's clock, modules, swap, reboot, accounting, quotas, I/O ports
    "init_module", "finit_module", "delete_module", "create_module", "kexec_load", "kexec_file_load",
    "reboot", "swapon", "swapoff", "acct", "quotactl", "settimeofday", "clock_settime", "clock_adjtime",
    "adjtimex", "stime", "iopl", "ioperm", "syslog", "vhangup", "nfsservctl", "uselib", "ustat", "sysfs",
    "_sysctl", "get_kernel_syms", "query_module", "mbind", "set_mempolicy", "move_pages", "vm86", "vm86old",
)
# clone with any of these flags would make a namespace (bwrap's reaper made the sandbox's already)
_CLONE_NAMESPACES = (0x00020000, 0x02000000, 0x04000000, 0x08000000, 0x10000000, 0x20000000, 0x40000000,
                     0x00000080)  # NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET, NEWTIME
_SOCKET_FAMILIES = (socket.AF_UNIX, socket.AF_INET, socket.AF_INET6)  # the rest: netlink, packet, vsock, alg, ...
_TERMINAL_IOCTLS = (0x5412, 0x541C)  # TIOCSTI (push input into a terminal), TIOCLINUX

_ALLOW = 0x7FFF0000
_CMP_EQ, _CMP_GE, _CMP_MASKED_EQ = 4, 5, 7


def _errno(code: int) -> int:
    return 0x00050000 | (code & 0xFFFF)


class _ArgCmp(ctypes.Structure):
    _fields_ = [("arg", ctypes.c_uint), ("op", ctypes.c_int), ("datum_a", ctypes.c_uint64),
                ("datum_b", ctypes.c_uint64)]


@functools.lru_cache(maxsize=1)
def _library() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("seccomp")
    if name is None:
        return None
    try:
        lib = ctypes.CDLL(name)
    except OSError:
        return None
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_release.argtypes = [ctypes.c_void_p]
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_rule_add_array.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int, ctypes.c_uint,
                                           ctypes.POINTER(_ArgCmp)]
    lib.seccomp_export_bpf.argtypes = [ctypes.c_void_p, ctypes.c_int]
    return lib


def unavailable() -> str | None:
    """Why the filter cannot be built here; None when it can."""
    try:
        _compiled()
    except RuntimeError as exc:
        return str(exc)
    return None


def program() -> IO[bytes]:
    """The compiled filter, in a temporary file positioned at its start (pass its fd to bwrap)."""
    compiled = tempfile.TemporaryFile()
    compiled.write(_compiled())
    compiled.flush()
    compiled.seek(0)
    return compiled


@functools.lru_cache(maxsize=1)
def _compiled() -> bytes:
    """The filter as a classic BPF program, built once per process."""
    lib = _library()
    if lib is None:
        raise RuntimeError("libseccomp is not installed (Debian/Ubuntu: apt-get install libseccomp2)")
    ctx = lib.seccomp_init(_ALLOW)
    if not ctx:
        raise RuntimeError("seccomp_init failed")
    try:
        def rule(action: int, name: str, *cmps: tuple[int, int, int, int]) -> None:
            number = lib.seccomp_syscall_resolve_name(name.encode())
            if number == -1:  # unknown to this libseccomp: no such call to refuse
                return
            array = (_ArgCmp * len(cmps))(*[_ArgCmp(*c) for c in cmps]) if cmps else None
            code = lib.seccomp_rule_add_array(ctx, action, number, len(cmps), array)
            if code < 0:
                raise RuntimeError(f"seccomp rule for {name} failed: {errno.errorcode.get(-code, code)}")

        eperm = _errno(errno.EPERM)
        for name in DENIED:
            rule(eperm, name)
        rule(_errno(errno.ENOSYS), "clone3")  # its flags sit in memory the filter cannot read
        for flag in _CLONE_NAMESPACES:
            rule(eperm, "clone", (0, _CMP_MASKED_EQ, flag, flag))
        for family in range(max(_SOCKET_FAMILIES) + 1):
            if family not in _SOCKET_FAMILIES:
                rule(_errno(errno.EAFNOSUPPORT), "socket", (0, _CMP_EQ, family, 0))
        rule(_errno(errno.EAFNOSUPPORT), "socket", (0, _CMP_GE, max(_SOCKET_FAMILIES) + 1, 0))
        for request in _TERMINAL_IOCTLS:
            rule(eperm, "ioctl", (1, _CMP_MASKED_EQ, 0xFFFFFFFF, request))
        with tempfile.TemporaryFile() as out:  # libseccomp writes to an fd only
            code = lib.seccomp_export_bpf(ctx, out.fileno())
            if code < 0:
                raise RuntimeError(f"seccomp_export_bpf failed: {errno.errorcode.get(-code, code)}")
            out.seek(0)
            return out.read()
    finally:
        lib.seccomp_release(ctx)
