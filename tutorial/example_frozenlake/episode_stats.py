"""Average the FrozenLake workflow's per-episode counts over a run's episodes file.

    python episode_stats.py runs/x/eval_episodes.jsonl [more files...]

Prints, per file: episodes, failed episodes, and the mean of each count the workflow keeps in
`metrics` (turns, invalid_actions, bumps, goal, hole, invalid_observation).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def stats(path: Path) -> dict[str, float]:
    """Episodes, failed episodes and the mean of every workflow metric in one episodes file."""
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    done = [r for r in rows if not r.get("error")]
    keys = sorted({k for r in done for k in (r.get("metrics") or {})})
    means = {k: sum(r["metrics"].get(k, 0.0) for r in done) / max(len(done), 1) for k in keys}
    return {"episodes": len(rows), "failed": len(rows) - len(done), **means}


def main(argv: list[str]) -> None:
    if not argv:
        sys.exit(__doc__)
    for name in argv:
        print(name, json.dumps({k: round(v, 3) for k, v in stats(Path(name)).items()}))


if __name__ == "__main__":
    main(sys.argv[1:])
