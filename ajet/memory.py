"""Memory a long run gives back: jemalloc where it is installed, freed heap returned to the system, and
oneDNN's kernel cache bounded.

Measured on the tool-agent quickstart (SmolLM2-135M, bf16 autocast, 2-core AVX-512 BF16 CPU), where
the training process's resident memory climbed from 3.1 GB after the first SFT step to 4.9 GB after the
19th and 6.3 GB in GRPO, although what a step holds stays the same:

- glibc's malloc keeps freed memory in its heaps for reuse (one heap per thread that allocates: the
  trainer's, the engine worker's), and tensors of new sizes fit the holes badly, so the heaps only
  grow; after an SFT step 1.1 GB was in use and 3.0-4.0 GB resident. `return_freed_memory()`
  (`malloc_trim(0)`) gives the free pages of every heap back, in a few milliseconds.
- oneDNN compiles a kernel for each matmul shape it meets and keeps up to 1,024 of them. Under bf16
  autocast every micro-batch has a new length, so each step added ~70 MB of kernels (35 MB with 256
  kept, flat after 5 steps, no slower). `bound_kernel_cache()` caps the cache at 256 unless
  `ONEDNN_PRIMITIVE_CACHE_CAPACITY` is set.
- Even trimmed, glibc's heaps hold more than a step needs: on a 2-core AMX CPU, SFT steps of that
  quickstart peaked at 3.0 GB with glibc's malloc and 2.7 GB with jemalloc, which was also faster
  (7.0 s a step instead of 9.2; 8 steps each, two runs each, interleaved). The `ajet` command therefore
  runs itself again under jemalloc when the system has it (`with_jemalloc`: Debian/Ubuntu package
  libjemalloc2), as Intel's PyTorch launcher does; `AJET_ALLOCATOR=system` keeps glibc's. Processes
  that ajet starts (MCP servers, swift, LLaMA-Factory) get the environment as it was, without the
  preload.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os
import sys

KERNEL_CACHE_CAPACITY = 256
ALLOCATOR_ENV = "AJET_ALLOCATOR"  # "system": glibc's malloc, no re-run under jemalloc
_PRELOAD_BEFORE_ENV = "_AJET_LD_PRELOAD_BEFORE"  # set in the re-run: LD_PRELOAD as the user had it
JEMALLOC = "libjemalloc.so.2"


def with_jemalloc() -> None:
    """Run this command again (same interpreter, same arguments) with jemalloc preloaded, when the system
    has it, this process has not got it and `AJET_ALLOCATOR` is not `system`; returns in the re-run
    process, after putting LD_PRELOAD back as it was for the processes this one starts. Only for the
    command line's own process (`ajet.cli.main` with argv=None): nothing else may be replaced."""
    if _PRELOAD_BEFORE_ENV in os.environ:  # the re-run: preloaded (or ld.so could not, and said so)
        before = os.environ.pop(_PRELOAD_BEFORE_ENV)
        if before:
            os.environ["LD_PRELOAD"] = before
        else:
            os.environ.pop("LD_PRELOAD", None)
        return
    if os.environ.get(ALLOCATOR_ENV, "").lower() == "system" or not sys.platform.startswith("linux"):
        return
    library = jemalloc_library()
    if library is None or _mapped("jemalloc"):
        return
    before = os.environ.get("LD_PRELOAD", "")
    env = {**os.environ, "LD_PRELOAD": f"{library} {before}".strip(), _PRELOAD_BEFORE_ENV: before}
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, [sys.executable, *sys.orig_argv[1:]], env)


@functools.cache
def jemalloc_library() -> str | None:
    """The path of jemalloc's shared library, or None where the system has none."""
    for folder in ("/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib",
                   "/usr/local/lib"):
        path = os.path.join(folder, JEMALLOC)
        if os.path.exists(path):
            return path
    return None


def _mapped(name: str) -> bool:
    """Whether a shared library whose path contains `name` is loaded into this process."""
    try:
        with open("/proc/self/maps") as maps:
            return any(name in line for line in maps)
    except OSError:
        return False


def bound_kernel_cache() -> None:
    """Cap oneDNN's cache of compiled kernels (ONEDNN_PRIMITIVE_CACHE_CAPACITY) at KERNEL_CACHE_CAPACITY
    unless it is set. oneDNN reads it once, at its first kernel: call this before any model runs."""
    os.environ.setdefault("ONEDNN_PRIMITIVE_CACHE_CAPACITY", str(KERNEL_CACHE_CAPACITY))


def return_freed_memory() -> None:
    """Give the freed pages of every malloc heap back to the system (glibc's malloc_trim); a no-op where
    the C library is not glibc."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


@functools.cache
def _malloc_trim():
    name = ctypes.util.find_library("c")
    try:
        return getattr(ctypes.CDLL(name), "malloc_trim", None) if name else None
    except OSError:
        return None
