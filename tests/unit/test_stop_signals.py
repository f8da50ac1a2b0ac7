"""SIGINT and SIGTERM stop `ajet` training and eval with exit 130 / 143, never 0, even when the
KeyboardInterrupt they raise is lost or a cancellation is swallowed (ajet/backbone/stop.py).

These tests do not depend on how the suite was started: a background job of a non-interactive shell
(`cmd &`, nohup) starts every child with SIGINT ignored, and the CLI keeps an inherited ignore (as Unix
programs do, docs/reliability.md). The `terminal_dispositions` fixture sets both signals as a terminal
would; the policy for an inherited ignore has a test of its own."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import types
from pathlib import Path

import pytest

from ajet.backbone import stop
from ajet.cli import main


@pytest.fixture
def conf(tmp_path: Path) -> Path:
    path = tmp_path / "my.yaml"
    path.write_text(f"ajet:\n  project: p\n  output_dir: {tmp_path / 'run'}\n  workflow: agent.py:A\n")
    return path


@pytest.fixture(autouse=True)
def terminal_dispositions():
    """SIGINT and SIGTERM as a shell started from a terminal leaves them (not ignored), whatever this
    process inherited; put back afterwards."""
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    signal.signal(signal.SIGINT, signal.default_int_handler)
    if saved[signal.SIGTERM] is signal.SIG_IGN:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
    yield
    for sig, handler in saved.items():
        signal.signal(sig, handler)


def _backbone(monkeypatch, run) -> None:
    monkeypatch.setitem(sys.modules, "ajet.backbone.registry", types.SimpleNamespace(run_backbone=run))


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_lost_interrupt_still_exits_128_plus_the_signal(conf, monkeypatch, capsys, sig):
    def swallows(cfg, resume):  # a library that catches BaseException and carries on to the end
        try:
            os.kill(os.getpid(), sig)
        except BaseException:  # noqa: BLE001
            pass
        return None

    _backbone(monkeypatch, swallows)
    # what was installed before (a library imported by an earlier test may have set its own handler)
    before = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    assert main(["--conf", str(conf)]) == 128 + sig
    assert capsys.readouterr().err.strip() == f"error: stopped by {sig.name}"
    # in-process: the handlers are put back as they were
    assert (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)) == before


def test_a_signal_inside_run_async_cancels_the_main_task_even_if_it_swallows_it(conf, monkeypatch):
    unwound = []

    async def swallowing_step():
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            await asyncio.sleep(30)  # cancelled here, not 30 s later
        except asyncio.CancelledError:
            unwound.append("cancelled")  # ...and swallowed: the work "finishes"
        return "done"

    def run(cfg, resume):
        return stop.run_async(swallowing_step())

    _backbone(monkeypatch, run)
    assert main(["--conf", str(conf)]) == 143 and unwound == ["cancelled"]


def test_check_between_steps_raises_after_a_signal_and_a_new_block_starts_clean():
    with stop.StopSignals() as block:
        stop.check()  # no signal: nothing to do
    assert block.exit_code is None
    with pytest.raises(KeyboardInterrupt, match="stopped by SIGTERM"):
        with stop.StopSignals() as block:
            try:
                os.kill(os.getpid(), signal.SIGTERM)
            except KeyboardInterrupt:
                pass
            stop.check()
    assert block.exit_code == 143
    stop.check()  # outside a block, nothing is pending


def test_a_signal_inherited_as_ignored_stays_ignored_and_sigterm_still_stops(conf, monkeypatch, capsys):
    """The documented policy: a run started with SIGINT ignored (nohup, `cmd &` in a script) keeps ignoring
    it, as Unix programs do; SIGTERM still stops it with 143."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    sent = []

    def interrupted(cfg, resume):
        os.kill(os.getpid(), signal.SIGINT)  # ignored: the work goes on
        sent.append("after SIGINT")
        return None

    _backbone(monkeypatch, interrupted)
    assert main(["--conf", str(conf)]) == 0 and sent == ["after SIGINT"]
    assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN  # still ignored after the command

    def terminated(cfg, resume):
        try:
            os.kill(os.getpid(), signal.SIGTERM)
        except BaseException:  # noqa: BLE001 - lost, as in the test above
            pass
        return None

    _backbone(monkeypatch, terminated)
    assert main(["--conf", str(conf)]) == 143
    assert capsys.readouterr().err.strip().endswith("error: stopped by SIGTERM")
