"""Install the zoo's published MCP servers, each into its own venv, and build the fixtures.

    python benchmarks/mcp_zoo/setup.py [--servers git,birds] [--fixtures-only]

Each published server goes into `~/.cache/ajet/mcp_zoo/venvs/<name>` at its pinned version (and
the pins of its dependencies, zoo.PUBLISHED), as `uvx` or `pipx` users install one: never into
ajet's own environment. A venv whose pins already match is kept, so a second run only rebuilds
the fixtures (always: the git server's write tools change its repository). A server that needs a
newer Python than any found here is reported and skipped, not an error. Last line:
`installed=<k> kept=<m> skipped=<s> fixtures=<f> seconds=<t>`.
"""

from __future__ import annotations

import argparse
import glob
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import zoo_fixtures  # noqa: E402
from zoo import FIXTURES, PUBLISHED, Published  # noqa: E402

MARKER = ".zoo-requirements"  # the requirement lines a venv was made with


def find_python(version: tuple[int, int]) -> str | None:
    """An interpreter of at least `version` that runs: this one, else pythonX.Y on PATH, else a pyenv
    install (a pyenv shim on PATH whose version is not active fails, so each is tried)."""
    if sys.version_info[:2] >= version:
        return sys.executable
    candidates = []
    for minor in range(version[1], version[1] + 4):
        pyenv = Path(os.environ.get("PYENV_ROOT", "~/.pyenv")).expanduser()
        candidates += sorted(glob.glob(str(pyenv / "versions" / f"{version[0]}.{minor}.*" / "bin" / "python")))
        candidates += [found for found in [shutil.which(f"python{version[0]}.{minor}")] if found]
    for candidate in candidates:
        probe = subprocess.run([candidate, "-c", "import sys; print(sys.version_info >= %r)" % (version,)],
                               capture_output=True, text=True)
        if probe.returncode == 0 and probe.stdout.strip() == "True":
            return candidate
    return None


def requirements(server: Published) -> list[str]:
    return [server.requirement, *server.pins]


def install(name: str, server: Published) -> str:
    """'kept', 'installed' or 'skipped: <why>'."""
    venv = server.venv(name)
    wanted = "\n".join(requirements(server)) + "\n"
    marker = venv / MARKER
    if server.executable(name).exists() and marker.exists() and marker.read_text() == wanted:
        return "kept"
    python = find_python(server.python)
    if python is None:
        return f"skipped: {server.package} needs Python >= {'.'.join(map(str, server.python))}, none found"
    shutil.rmtree(venv, ignore_errors=True)
    subprocess.run([python, "-m", "venv", str(venv)], check=True)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    done = subprocess.run([*pip, *requirements(server)], capture_output=True, text=True)
    if done.returncode or not server.executable(name).exists():
        shutil.rmtree(venv, ignore_errors=True)
        raise SystemExit(f"installing {server.requirement} failed:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    marker.write_text(wanted)
    return "installed"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--servers", default=",".join(PUBLISHED), help="published servers to install (default: all)")
    parser.add_argument("--fixtures-only", action="store_true", help="only rebuild the fixtures")
    args = parser.parse_args(argv)
    started = time.time()
    names = [n for n in args.servers.split(",") if n]
    unknown = [n for n in names if n not in PUBLISHED]
    if unknown:
        parser.error(f"not a published zoo server: {', '.join(unknown)} (known: {', '.join(PUBLISHED)})")
    counts = {"installed": 0, "kept": 0, "skipped": 0}
    if not args.fixtures_only:
        for name in names:
            t0 = time.time()
            status = install(name, PUBLISHED[name])
            counts[status.split(":")[0]] += 1
            print(f"{name:14s} {PUBLISHED[name].requirement:32s} {status} ({time.time() - t0:.1f} s)", flush=True)
    wanted = sorted({f for n in names for f in PUBLISHED[n].fixtures})
    built = zoo_fixtures.build(FIXTURES, wanted)
    print(f"fixtures under {FIXTURES}: {', '.join(built) or 'none'}")
    print(f"installed={counts['installed']} kept={counts['kept']} skipped={counts['skipped']} "
          f"fixtures={len(built)} seconds={time.time() - started:.1f}")


if __name__ == "__main__":
    main()
