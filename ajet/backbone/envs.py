"""Managed Python environments for backbones whose pins clash with ajet's (ms-swift, LLaMA-Factory).

Each backbone declares an `EnvSpec`: pip steps with pinned versions, and a check that must pass in
the finished environment. `ensure_env(spec)` returns the Python executable of

- the user's own environment, when they pass one (`ajet.backbone.<name>.python=/path/to/python`):
  it is checked, never changed;
- else the managed virtual environment `~/.cache/ajet/envs/<name>-<key>/` (`AJET_CACHE` moves the
  root), built on first use and reused after. `key` hashes the spec, so a change of pins builds a
  new environment beside the old one instead of mutating it.

A build writes `build.log` (pip's whole output) and, last, the marker `.ajet-ready`; a folder
without the marker is a broken or interrupted build and is rebuilt. A lock file serialises two
processes that build the same environment. Virtual environments cannot be moved after creation
(their scripts hold absolute paths), hence build-in-place plus marker rather than build-and-rename.

ajet itself reaches the environment through `PYTHONPATH` (`ajet_path_entry()`: a folder holding
only a link to this ajet package), so the backend's subprocess imports the same ajet as the parent
process without a second install that could drift from it; ajet's own runtime dependencies that
the backend does not bring are in the spec's steps.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections import deque
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from ajet.errors import BackboneError

READY = ".ajet-ready"


@dataclass(frozen=True)
class EnvSpec:
    """How to build one backbone's environment.

    steps: pip install argument lists, run in order (`("torch==2.13.0",)`, `("ms-swift==4.6.0",
      "msgspec")`, ...): order matters when one step must pin what a later one would pull.
    check: Python code run in the finished environment; it must exit 0 (imports the backend).
    """

    name: str
    steps: tuple[tuple[str, ...], ...]
    check: str

    @property
    def key(self) -> str:
        blob = json.dumps({**asdict(self), "python": sys.version_info[:2]}, sort_keys=True)
        return hashlib.sha1(blob.encode()).hexdigest()[:10]


def envs_root() -> Path:
    return Path(os.environ.get("AJET_CACHE", Path.home() / ".cache" / "ajet")) / "envs"


def env_dir(spec: EnvSpec) -> Path:
    return envs_root() / f"{spec.name}-{spec.key}"


def env_python(folder: Path) -> Path:
    return folder / "bin" / "python"


def is_ready(spec: EnvSpec) -> bool:
    return (env_dir(spec) / READY).is_file()


def ensure_env(
    spec: EnvSpec,
    *,
    python: str | None = None,
    force: bool = False,
    log: Callable[[str], None] | None = None,
) -> Path:
    """The Python executable for `spec`: the user's `python` (checked) or the managed one (built if needed).

    log: called with progress lines (pip's output as it arrives); default: print to stderr.
    """
    say = log or (lambda line: print(line, file=sys.stderr, flush=True))
    if python is not None:
        exe = Path(python).expanduser()
        if not exe.is_file():
            raise BackboneError(f"ajet.backbone.{spec.name}.python={python!r} does not exist; point it at the "
                                "python executable of an environment with the backend installed, or remove it "
                                f"to let ajet build one (`ajet setup {spec.name}`)")
        _check(spec, exe, where=f"your environment {python!r}")
        return exe
    folder = env_dir(spec)
    folder.parent.mkdir(parents=True, exist_ok=True)
    with _locked(folder.with_suffix(".lock")):
        if (folder / READY).is_file() and not force:
            return env_python(folder)
        _build(spec, folder, say)
    return env_python(folder)


def _build(spec: EnvSpec, folder: Path, say: Callable[[str], None]) -> None:
    if folder.exists():
        shutil.rmtree(folder)
    started = time.monotonic()
    say(f"building the {spec.name} environment in {folder} (once; later runs reuse it)")
    _run([sys.executable, "-m", "venv", str(folder)], folder, say, what="create the virtual environment")
    python = str(env_python(folder))
    _run([python, "-m", "pip", "install", "--upgrade", "pip"], folder, say, what="upgrade pip")
    for n, step in enumerate(spec.steps, 1):
        say(f"[{n}/{len(spec.steps)}] pip install {' '.join(step)}")
        _run([python, "-m", "pip", "install", *step], folder, say, what=f"pip install {' '.join(step)}")
    _check(spec, Path(python), where=f"the new environment {folder}")
    (folder / READY).write_text(json.dumps(asdict(spec), indent=1), encoding="utf-8")
    say(f"{spec.name} environment ready in {time.monotonic() - started:.0f} s")


def _run(cmd: list[str], folder: Path, say: Callable[[str], None], what: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    tail: deque[str] = deque(maxlen=25)
    with (folder / "build.log").open("a", encoding="utf-8") as logfile:
        logfile.write(f"$ {' '.join(cmd)}\n")
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                env={**os.environ, "PIP_PROGRESS_BAR": "off"})
        assert proc.stdout is not None
        for line in proc.stdout:
            logfile.write(line)
            line = line.rstrip()
            if line:
                tail.append(line)
                if line.startswith(("Collecting", "Downloading", "Installing", "Successfully", "ERROR")):
                    say(f"  {line[:160]}")
        code = proc.wait()
    if code != 0:
        detail = "\n".join(f"    {t}" for t in tail)
        raise BackboneError(f"could not {what} (exit {code}); the last lines of {folder / 'build.log'}:\n{detail}\n"
                            "fix the cause (network, disk space, a pin) and run again: the half-built "
                            "environment is rebuilt")


def _check(spec: EnvSpec, python: Path, where: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(ajet_path_entry())}
    proc = subprocess.run([str(python), "-c", spec.check], capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        tail = "\n".join(f"    {t}" for t in (proc.stderr or proc.stdout).strip().splitlines()[-12:])
        raise BackboneError(f"{where} cannot run the {spec.name} backbone: `{spec.check}` failed:\n{tail}")


def ajet_path_entry() -> Path:
    """A folder to put on a subprocess's PYTHONPATH so it imports this very ajet package, and nothing
    else from this interpreter's site-packages (whose torch/transformers would shadow the backend's)."""
    import ajet

    package = Path(ajet.__file__).resolve().parent
    link_root = envs_root() / "_ajet" / hashlib.sha1(str(package).encode()).hexdigest()[:10]
    link = link_root / "ajet"
    if not link.is_symlink() or link.resolve() != package:
        link_root.mkdir(parents=True, exist_ok=True)
        tmp = link_root / f".ajet.{os.getpid()}"
        tmp.unlink(missing_ok=True)
        tmp.symlink_to(package, target_is_directory=True)
        os.replace(tmp, link)  # atomic: a concurrent run sees the old link or the new one
    return link_root


class _locked:
    """An exclusive file lock for the duration of a `with` block (two runs building one env)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __enter__(self) -> None:
        self._file = self.path.open("w")
        fcntl.flock(self._file, fcntl.LOCK_EX)

    def __exit__(self, *exc: object) -> None:
        fcntl.flock(self._file, fcntl.LOCK_UN)
        self._file.close()
