"""ajet.memory: the `ajet` command runs itself again under jemalloc where the system has it, and leaves the
environment of what it starts as the user had it; malloc_trim and the kernel-cache bound are safe calls."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from ajet.memory import ALLOCATOR_ENV, bound_kernel_cache, jemalloc_library, return_freed_memory

# What the process that runs sees: whether jemalloc is mapped into it, and its LD_PRELOAD (what children get).
PROBE = ("import os; from ajet.memory import with_jemalloc; with_jemalloc(); "
         "print(any('jemalloc' in line for line in open('/proc/self/maps')), repr(os.environ.get('LD_PRELOAD')))")

needs_jemalloc = pytest.mark.skipif(jemalloc_library() is None or not sys.platform.startswith("linux"),
                                    reason="jemalloc is not installed (Debian/Ubuntu: apt-get install libjemalloc2)")


def probe(**env: str) -> str:
    clean = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", ALLOCATOR_ENV)}
    done = subprocess.run([sys.executable, "-c", PROBE], env={**clean, **env}, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@needs_jemalloc
def test_the_command_reruns_under_jemalloc_and_children_get_no_preload():
    assert probe() == "True None"


@needs_jemalloc
def test_a_preload_of_the_users_own_is_kept_for_children():
    libm = next(p for p in ("/lib/x86_64-linux-gnu/libm.so.6", "/usr/lib/x86_64-linux-gnu/libm.so.6",
                            "/lib/aarch64-linux-gnu/libm.so.6", "/lib64/libm.so.6") if os.path.exists(p))
    assert probe(LD_PRELOAD=libm) == f"True {libm!r}"


@needs_jemalloc
def test_allocator_system_keeps_glibc_malloc():
    assert probe(**{ALLOCATOR_ENV: "system"}) == "False None"


def test_without_jemalloc_nothing_is_rerun(monkeypatch):
    monkeypatch.setattr("ajet.memory.jemalloc_library", lambda: None)
    monkeypatch.setattr(os, "execve", lambda *a: pytest.fail("re-ran without jemalloc"))
    monkeypatch.delenv("_AJET_LD_PRELOAD_BEFORE", raising=False)
    monkeypatch.delenv(ALLOCATOR_ENV, raising=False)
    from ajet.memory import with_jemalloc

    with_jemalloc()


def test_trim_and_kernel_cache_bound_are_safe(monkeypatch):
    monkeypatch.delenv("ONEDNN_PRIMITIVE_CACHE_CAPACITY", raising=False)
    bound_kernel_cache()
    assert os.environ["ONEDNN_PRIMITIVE_CACHE_CAPACITY"] == "256"
    monkeypatch.setenv("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "64")
    bound_kernel_cache()  # a user's own setting wins
    assert os.environ["ONEDNN_PRIMITIVE_CACHE_CAPACITY"] == "64"
    return_freed_memory()
