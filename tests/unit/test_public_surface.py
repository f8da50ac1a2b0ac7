"""The public surface: `import ajet` gives the user's vocabulary in a sorted, importable `__all__`,
and the README's own Python and YAML snippets work as written."""

from __future__ import annotations

import json
import re
from pathlib import Path

import ajet
from ajet.cli import main

REPO = Path(__file__).resolve().parents[2]


def test_all_is_sorted_and_every_name_imports() -> None:
    assert ajet.__all__ == sorted(ajet.__all__)
    for name in ajet.__all__:
        assert getattr(ajet, name) is not None
    public = {n for n in vars(ajet) if not n.startswith("_") and n not in ("annotations",)}
    modules = {n for n in public if type(getattr(ajet, n)).__name__ == "module"}
    assert public - modules == set(ajet.__all__)


def _blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", (REPO / "README.md").read_text(), re.S)


def test_readme_workflow_and_yaml_run_as_written(tmp_path: Path, monkeypatch) -> None:
    (python,) = [b for b in _blocks("python") if "class MyAgent" in b]
    (yaml,) = [b for b in _blocks("yaml") if "my_agent.py:MyAgent" in b]
    (tmp_path / "my_agent.py").write_text(python)
    (tmp_path / "my.yaml").write_text(yaml)
    rows = [{"query": "What is 2 + 2?", "answer": "4"}, {"query": "Say hi.", "answer": "hi"}]
    for name in ("train.jsonl", "val.jsonl"):
        (tmp_path / name).write_text("".join(json.dumps(r) + "\n" for r in rows))
    monkeypatch.chdir(tmp_path)
    assert main(["eval", "--conf", "my.yaml", "model.path=tiny-random", "rollout.max_tokens_per_turn=8",
                 f"output_dir={tmp_path / 'out'}"]) == 0
    report = json.loads((tmp_path / "out" / "eval.json").read_text())
    assert (report["episodes"], report["failed"]) == (2, 0)


def test_ci_runs_the_readme_test_command_verbatim() -> None:
    readme = (REPO / "README.md").read_text()
    section = readme[readme.index("## Tests"):]
    (command,) = re.findall(r"```bash\n(.*?)```", section, re.S)[:1]
    assert command.strip() in (REPO / ".ci" / "run").read_text()
