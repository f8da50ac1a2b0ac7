"""The OS-level walls of `run_python`: a bubblewrap (`bwrap`) command line, and whether it works here.

What the sandboxed process sees and may do (each is a kernel mechanism, not a Python check):

- its own mount namespace whose root is an empty read-only tmpfs holding only: /usr (and the /bin, /lib,
  ... links or folders beside it), the Python installation that runs it (its prefixes, read-only), the
  few files of /etc the dynamic linker reads, a fresh /proc and a minimal /dev, and /sandbox: a tmpfs of
  `max_folder_bytes`, the only writable path, its cwd, HOME and TMPDIR, gone when it ends. The project,
  the task files, the home folder and every other path of the host do not exist there; every mount is
  nosuid and no new privileges can be gained (bwrap sets PR_SET_NO_NEW_PRIVS);
- a new PID namespace (it sees only its own processes; /proc/<pid> of the trainer does not exist), a new
  network namespace (only an unconnected loopback: no route out, no host port, no abstract socket of the
  host), new IPC and UTS namespaces;
- a new session (`--new-session`): no controlling terminal, so TIOCSTI cannot push keystrokes into the
  terminal that started ajet (CVE-2017-5226, which bwrap's manual warns about);
- a seccomp filter (ajet/sandbox/seccomp.py): the system calls that reach the kernel's riskier parts
  or would leave these walls (ptrace, mount, unshare/setns, bpf, io_uring, keyctl, perf_event_open,
  clone into new namespaces, sockets other than unix/inet, TIOCSTI, ...) answer EPERM;
- killed with its whole namespace when the supervisor or bwrap dies (`--die-with-parent`);
- as root, bwrap keeps only CAP_SETUID/CAP_SETGID, which the bootstrap spends at once to become
  nobody (65534): no capability is left and RLIMIT_NPROC=0 binds (the kernel ignores it for root), so
  it can neither fork nor exec. As another user, bwrap runs unprivileged in a user namespace and the
  process keeps that user's id, with RLIMIT_NPROC=0 too.

Not covered: the kernel itself (a kernel exploit through an allowed system call escapes any namespace),
and CPU time of the bwrap helper processes (they only wait).
"""

from __future__ import annotations

import functools
import os
import shutil
import site
import subprocess
import sys
from pathlib import Path

from ajet.sandbox import seccomp

INSIDE = "/sandbox"  # where the run's folder is, inside
NOBODY = (65534, 65534)
_MERGED_USR = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
_ETC = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/alternatives", "/etc/localtime")


def command(python_args: list[str], code_fd: int, folder_bytes: int, seccomp_fd: int) -> list[str]:
    """bwrap's argv: run `python python_args...` confined, with the code read from `code_fd` into
    /sandbox/main.py and the system-call filter (ajet/sandbox/seccomp.py) read from `seccomp_fd`."""
    exe = shutil.which("bwrap") or "bwrap"
    args = [exe, "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
            "--hostname", "sandbox", "--die-with-parent", "--new-session", "--clearenv"]
    if os.geteuid() == 0:  # privileged bwrap: keep only what the bootstrap needs to drop to nobody
        args += ["--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
    else:  # unprivileged: a user namespace, which may not open another one
        args += ["--unshare-user", "--disable-userns"]
    args += ["--ro-bind", "/usr", "/usr"]
    for path in _MERGED_USR:
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    for path in _ETC:
        args += ["--ro-bind-try", path, path]
    made: set[str] = set()
    for path in python_paths():
        for parent in reversed(Path(path).parents[:-1]):  # bwrap would copy /root's 0700: nobody could not enter
            if str(parent) not in made:
                made.add(str(parent))
                args += ["--perms", "0755", "--dir", str(parent)]
        args += ["--ro-bind", path, path]
    args += ["--proc", "/proc", "--dev", "/dev",
             "--perms", "0777", "--size", str(folder_bytes), "--tmpfs", INSIDE,
             "--perms", "0444", "--file", str(code_fd), f"{INSIDE}/main.py",
             "--remount-ro", "/", "--chdir", INSIDE, "--seccomp", str(seccomp_fd)]
    for key, value in environment().items():
        args += ["--setenv", key, value]
    return [*args, "--", python_executable(), *python_args]


def environment() -> dict[str, str]:
    """The whole environment of the sandboxed process (nothing of the trainer's: no API keys)."""
    return {"PATH": "/usr/bin:/bin", "HOME": INSIDE, "TMPDIR": INSIDE, "LANG": "C.UTF-8",
            "PYTHONIOENCODING": "utf-8", "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}


def python_executable() -> str:
    return os.path.realpath(sys.executable)


def python_paths() -> list[str]:
    """The folders of this Python installation (interpreter, standard library, site-packages), outside
    /usr, outermost only. Not the folders that .pth files add (an editable install points into a
    project): what is installed is visible, the project is not."""
    candidates = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
                  str(Path(python_executable()).parent.parent), *site.getsitepackages()}
    real = sorted({os.path.realpath(p) for p in candidates if p and os.path.isdir(p)})
    kept: list[str] = []
    for path in real:
        if path == "/usr" or path.startswith("/usr/") or any(path.startswith(k + os.sep) for k in kept):
            continue
        if path in ("/", *_MERGED_USR):
            continue
        kept.append(path)
    return kept


@functools.lru_cache(maxsize=1)
def unavailable() -> str | None:
    """Why bwrap cannot confine a Python process on this machine; None when it can (run once, cached)."""
    if not sys.platform.startswith("linux"):
        return f"bubblewrap needs Linux namespaces; this is {sys.platform}"
    if shutil.which("bwrap") is None:
        return "`bwrap` (bubblewrap) is not installed (Debian/Ubuntu: apt-get install bubblewrap)"
    why = seccomp.unavailable()
    if why is not None:
        return why
    import tempfile

    with tempfile.TemporaryFile() as code, seccomp.program() as syscalls:
        code.write(b"pass\n")
        code.flush()
        code.seek(0)
        argv = command(["-I", "-c", "import sys; sys.exit(0)"], code.fileno(), 1 << 20, syscalls.fileno())
        try:
            done = subprocess.run(argv, capture_output=True, timeout=30, pass_fds=(code.fileno(), syscalls.fileno()),
                                  stdin=subprocess.DEVNULL)
        except (OSError, subprocess.SubprocessError) as exc:
            return f"bwrap could not be started: {exc}"
    if done.returncode != 0:
        why = done.stderr.decode("utf-8", "replace").strip().splitlines()
        return f"bwrap failed here (exit {done.returncode}): {why[-1] if why else 'no message'}"
    return None
