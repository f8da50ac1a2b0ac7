"""The import graph: no circles, and lower layers never import higher ones (DESIGN.md §5)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "ajet"

# A module may not import these packages at all (lazily or not).
FORBIDDEN = {
    "ajet.config": ("ajet.gateway", "ajet.engine", "ajet.rollout", "ajet.trainer", "ajet.tracker", "ajet.judge"),
    "ajet.tracker": ("ajet.gateway", "ajet.engine", "ajet.rollout", "ajet.trainer", "ajet.backbone"),
    "ajet.engine": ("ajet.gateway", "ajet.rollout", "ajet.trainer", "ajet.backbone"),
    "ajet.gateway": ("ajet.rollout", "ajet.trainer", "ajet.backbone"),
    "ajet.trainer": ("ajet.gateway", "ajet.rollout", "ajet.backbone", "ajet.cli"),
    "ajet.rollout": ("ajet.trainer", "ajet.backbone", "ajet.cli"),
    "ajet.judge": ("ajet.gateway", "ajet.engine", "ajet.rollout", "ajet.trainer", "ajet.backbone"),
    "ajet.algorithm": ("ajet.gateway", "ajet.engine", "ajet.rollout", "ajet.trainer", "ajet.backbone"),
}
# The config loader asks the backbone registry (a leaf module: entry points, no torch) for the names
# it validates `--backbone` against.
ALLOWED = {("ajet.config.loader", "ajet.backbone.registry")}


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, top_level_only: bool) -> set[str]:
    tree = ast.parse(path.read_text())
    found: set[str] = set()
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    for node in nodes:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            continue
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("ajet"))
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("ajet"):
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names)  # `from ajet.backbone import swift`
    return found


def _graph(top_level_only: bool) -> dict[str, set[str]]:
    return {_module_name(p): _imports(p, top_level_only) for p in PACKAGE.rglob("*.py")}


def test_no_import_circles_at_module_level() -> None:
    graph = _graph(top_level_only=True)
    # An import of `a.b.c` runs `a/__init__` and `a/b/__init__` too, except the packages the importer
    # itself lives in (they are already being imported).
    def deps(name: str) -> set[str]:
        out = set()
        for target in graph.get(name, ()):
            parts = target.split(".")
            out.update(".".join(parts[:i]) for i in range(2, len(parts) + 1))
        return {d for d in out if d in graph and d != name and not name.startswith(d + ".")}

    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for dep in sorted(deps(node)):
            if state.get(dep) == 1:
                cycle = stack[stack.index(dep):] + [dep]
                raise AssertionError("import circle: " + " -> ".join(cycle))
            if dep not in state:
                visit(dep)
        stack.pop()
        state[node] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module)


def test_lower_layers_never_import_higher_ones() -> None:
    bad = []
    for module, targets in _graph(top_level_only=False).items():
        for layer, forbidden in FORBIDDEN.items():
            if module == layer or module.startswith(layer + "."):
                bad += [(module, t) for t in targets
                        if t.startswith(forbidden) and (module, t) not in ALLOWED]
    assert bad == []


def test_no_backbone_imports_another_backbones_package() -> None:
    """What backbones share lives beside them in ajet/backbone/ (monitor, launch, envs, preflight), so
    one backbone can be removed or installed without another."""
    backbone_dir = PACKAGE / "backbone"
    backbones = sorted(p.parent.name for p in backbone_dir.glob("*/__init__.py"))
    assert {"debug", "swift", "llamafactory"} <= set(backbones)
    bad = []
    for module, targets in _graph(top_level_only=False).items():
        own = module.split(".")[2] if module.startswith("ajet.backbone.") else None
        if own not in backbones:
            continue
        bad += [(module, t) for t in targets for other in backbones
                if other != own and (t == f"ajet.backbone.{other}" or t.startswith(f"ajet.backbone.{other}."))]
    assert bad == []
