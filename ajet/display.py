"""How progress is shown: a live rich display on a terminal, plain lines everywhere else.

When stdout is not a terminal (CI, `nohup`, a notebook, `ajet ... > run.log`), training and eval
print one plain, unwrapped line per step to stdout, flushed at once, so a log file shows where a
run is: stage, step/total, loss or reward, tokens/s, elapsed and ETA. `AJET_PROGRESS=plain` or
`=live` forces one mode.
"""

from __future__ import annotations

import os
import sys


def interactive() -> bool:
    """True when progress should be a live display (stdout is a terminal), False for plain lines."""
    forced = os.environ.get("AJET_PROGRESS", "").lower()
    if forced in ("plain", "live"):
        return forced == "live"
    return sys.stdout.isatty()


def plain_line(text: str) -> None:
    """One progress line for a log: stdout, no markup, no wrapping, flushed."""
    sys.stdout.write(text.rstrip("\n") + "\n")
    sys.stdout.flush()


def duration(seconds: float) -> str:
    """12 s, 4m05s, 1h02m: short and unambiguous in a log line."""
    seconds = max(0, int(round(seconds)))
    if seconds < 60:
        return f"{seconds} s"
    minutes, secs = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"
