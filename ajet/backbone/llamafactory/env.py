"""The managed environment of the llamafactory backbone: every version it installs, and why.

LLaMA-Factory 0.9.5 declares torch, torchvision, torchaudio, gradio, modelscope, av, vllm-style
extras and more; installed as declared that is a CUDA torch and about 6.6 GB. Text-only SFT, DPO
and KTO import far less (found by installing it with --no-deps and importing every training
workflow until nothing was missing):

- torch 2.13.0: any torch >= 2.4 works; 2.13.0 is the CPU build that lies on this machine kind's
  disk (pip takes it without a download). On a GPU machine pip fetches the CUDA build of the same
  version from PyPI.
- torchaudio 2.11.0, without its native libraries: `llamafactory/data/mm_plugin.py` imports
  torchaudio unconditionally (the chat template module imports mm_plugin), but only audio inputs
  call it. PyPI's torchaudio wheels link a CUDA torch (`libc10_cuda.so`) and fail to import beside a
  CPU torch, and no torchaudio matches torch 2.13. torchaudio itself supports running without its
  native part (`torchaudio/_extension/utils.py:_load_lib` returns False when the library file is
  absent, for pex deployments): we delete `torchaudio/lib/*.so` after install (`after` below), and
  `import torchaudio` works with any torch. 2.11.0 is the newest release (its metadata pins no
  torch version). Audio datasets are therefore not supported by this environment.
- torchvision: not installed. Nothing LLaMA-Factory runs for text imports it; transformers checks
  whether it is there before using it.
- llamafactory 0.9.5 with --no-deps: the release the issue targets; its declared extras above are
  skipped on purpose.
- transformers 5.6.0, datasets 4.0.0, accelerate 1.11.0, peft 0.18.1, trl 0.24.0: the newest
  versions LLaMA-Factory 0.9.5 accepts (it checks these ranges at start-up and refuses others).
- omegaconf 2.4.0: imported by `llamafactory.hparams.model_args` at import time.
- sentencepiece 0.2.1, protobuf 6.33.0: the slow tokenizers of Llama/Mistral-style checkpoints that
  ship no tokenizer.json need them (LLaMA-Factory declares both).

Result on this machine kind: about 1.5 GB (versus about 6.6 GB with the declared dependencies).

`environment_python` and `backend_env` say which Python runs LLaMA-Factory and with what environment
variables; training (run.py) and `ajet export --merge` (checkpoints.py) both start it that way.
"""

from __future__ import annotations

import os
from pathlib import Path

from rich.console import Console

from ajet.backbone.envs import EnvSpec, ensure_env

console = Console(stderr=True)

LLAMAFACTORY_VERSION = "0.9.5"

# find_spec locates the package without running torchaudio/__init__ (which would load the libraries).
_DROP_TORCHAUDIO_NATIVE = (
    "import importlib.util, pathlib\n"
    "root = pathlib.Path(importlib.util.find_spec('torchaudio').submodule_search_locations[0])\n"
    "for so in sorted((root / 'lib').glob('*.so')):\n"
    "    so.unlink()\n"
    "    print('removed', so)\n"
)

SPEC = EnvSpec(
    name="llamafactory",
    steps=(
        ("torch==2.13.0",),
        ("--no-deps", "torchaudio==2.11.0", f"llamafactory=={LLAMAFACTORY_VERSION}"),
        ("transformers==5.6.0", "datasets==4.0.0", "accelerate==1.11.0", "peft==0.18.1", "trl==0.24.0",
         "omegaconf==2.4.0", "sentencepiece==0.2.1", "protobuf==6.33.0"),
    ),
    after=_DROP_TORCHAUDIO_NATIVE,
    check=("import llamafactory.train.tuner, llamafactory.data.template, torchaudio; "
           f"from llamafactory.extras.env import VERSION; assert VERSION == {LLAMAFACTORY_VERSION!r}, VERSION"),
)


def setup(python: str | None = None, force: bool = False) -> Path:
    """`ajet setup llamafactory`: build (or check) the environment and return its Python."""
    return ensure_env(SPEC, python=python, force=force)


def backend_env() -> dict[str, str]:
    """The environment of LLaMA-Factory's processes: ours, without a PYTHONPATH that could put this
    interpreter's packages (another torch or transformers) ahead of the managed environment's."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(TOKENIZERS_PARALLELISM="false", HF_HUB_DISABLE_TELEMETRY="1", PYTHONUNBUFFERED="1")
    return env


def environment_python(recorded: str | None = None, own: str | None = None) -> Path:
    """The Python of LLaMA-Factory's environment: the user's own (`own`, checked), else the one a
    checkpoint recorded while it still works, else the managed one (built on first use)."""
    if own is None and recorded and Path(recorded).is_file():
        own = recorded
    return ensure_env(SPEC, python=own, log=lambda line: console.print(line, markup=False, highlight=False))
