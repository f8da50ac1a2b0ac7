"""The program the sandboxed interpreter runs first (`python -I -c BOOTSTRAP CONFIG_JSON`): it reads the
user's code, sets the resource limits, gives up root when it has it, installs the audit hook, then runs the
code as `__main__`.

The audit hook is the inner layer only. Python code can reach it (`gc.get_objects()` finds the hook and
its closure can be rewritten), so it guarantees nothing on its own: under `bwrap` the kernel holds the
walls (ajet/sandbox/bwrap.py) and the hook only turns the common refusals (fork, a socket, a write outside
the folder) into a clear `[ajet sandbox] blocked: <kind>` line the caller counts. Under
`unsafe_audit_hook` it is all there is.
"""

BOOTSTRAP = r"""
import json, os, resource, sys, traceback


def _contain(cfg):
    # Everything the hook reads lives in this closure, not in module globals the code could rebind
    # (`import __main__; __main__.ROOT = "/"`).
    for name, (soft, hard) in cfg["rlimits"].items():
        resource.setrlimit(getattr(resource, name), (soft, hard))
    if cfg.get("drop_to") is not None:  # root inside bwrap: become nobody, so RLIMIT_NPROC binds and no cap is left
        uid, gid = cfg["drop_to"]
        os.setgroups([])
        os.setresgid(gid, gid, gid)
        os.setresuid(uid, uid, uid)
    root = os.path.realpath(cfg["root"]) + os.sep
    fork = frozenset({"os.fork", "os.forkpty", "os.posix_spawn", "os.system", "subprocess.Popen", "os.startfile"})
    net = frozenset({"socket.__new__", "socket.connect", "socket.bind", "socket.getaddrinfo", "socket.gethostbyname",
                     "socket.gethostbyaddr", "socket.sendto", "socket.sendmsg", "socket.socketpair"})
    path_events = {"os.remove": 1, "os.rename": 2, "os.rmdir": 1, "os.mkdir": 1, "os.symlink": 2, "os.link": 2,
                   "os.chmod": 1, "os.chown": 1, "os.truncate": 1, "os.utime": 1, "shutil.rmtree": 1,
                   "os.chflags": 1, "os.setxattr": 1, "os.removexattr": 1}
    # ctypes may be imported (numpy and sympy do) but not used to reach C functions: no symbol lookups,
    # no calls through function pointers, no libraries beyond the process itself.
    ctypes_events = frozenset({"ctypes.dlsym", "ctypes.dlsym/handle", "ctypes.call_function"})
    write_flags = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
    write, realpath, fspath, getpid = os.write, os.path.realpath, os.fspath, os.getpid

    def refuse(kind, what):
        write(2, f"[ajet sandbox] blocked: {kind} ({what})\n".encode())
        raise PermissionError(f"[ajet sandbox] {kind} is not allowed here ({what})")

    def inside(path):
        if isinstance(path, int):
            return True  # an fd: it was opened through this hook
        try:
            full = realpath(fspath(path))
        except (TypeError, ValueError):
            return False
        full = full.decode() if isinstance(full, bytes) else full
        return full + "/" == root or full.startswith(root) or full == "/dev/null"

    def hook(event, args):
        if event in fork or event.startswith(("os.exec", "os.spawn")):
            refuse("process", event)
        elif event in net:
            refuse("network", event)
        elif event == "import" and args[0] == "_posixsubprocess":  # a fresh copy would bring fork_exec back
            refuse("process", "import " + args[0])
        elif event in ctypes_events or (event == "ctypes.dlopen" and args[0] is not None):
            refuse("process", event)
        elif event == "open":
            path, mode, flags = args
            writes = (isinstance(mode, str) and any(c in mode for c in "wax+")) or bool((flags or 0) & write_flags)
            if writes and not inside(path):
                refuse("write", repr(path))
        elif event in path_events:
            for path in args[:path_events[event]]:
                if not inside(path):
                    refuse("write", f"{event} {path!r}")
        elif event in ("os.kill", "os.killpg") and args[0] not in (0, getpid()):
            refuse("process", event)

    import _posixsubprocess  # its fork_exec raises no audit event (3.11): replace it before the code runs

    def no_fork_exec(*args, **kwargs):
        refuse("process", "_posixsubprocess.fork_exec")

    _posixsubprocess.fork_exec = no_fork_exec
    sys.addaudithook(hook)


_cfg = json.loads(sys.argv[1])
with open(_cfg["main"], encoding="utf-8") as _f:
    _source = _f.read()
sys.argv = [_cfg["main"]]
_contain(_cfg)
del _contain, _cfg, _f
try:
    exec(compile(_source, "main.py", "exec"), {"__name__": "__main__", "__builtins__": __builtins__})
except SystemExit:
    raise
except BaseException as exc:  # the traceback of the user's code only, without this bootstrap's frames
    shown = traceback.TracebackException(type(exc), exc, exc.__traceback__)
    shown.stack = traceback.StackSummary.from_list([f for f in shown.stack if f.filename != "<string>"])
    sys.stderr.write("".join(shown.format()))
    sys.exit(1)
"""
