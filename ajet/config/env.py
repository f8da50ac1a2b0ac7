"""Read a `.env` file beside the user's YAML into the environment, as the MCPTrainAgent seed does.

So `api_key: ${oc.env:OPENAI_API_KEY}` works with the key kept in `.env` (never in the YAML or on
the command line). Variables already set in the environment win over the file.
"""

from __future__ import annotations

import os
from pathlib import Path

from ajet.errors import ConfigError


def read_env_file(folder: Path) -> list[str]:
    """Load `folder/.env` when it exists; return the names it set (none when there is no file)."""
    path = Path(folder) / ".env"
    if not path.is_file():
        return []
    from dotenv import dotenv_values

    try:
        values = dotenv_values(path)
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}") from None
    added = [k for k, v in values.items() if v is not None and k not in os.environ]
    for key in added:
        os.environ[key] = values[key]  # type: ignore[assignment]
    return added
