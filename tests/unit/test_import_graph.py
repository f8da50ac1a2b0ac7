"""The import graph: no circles, no two files importing each other, no private names crossing a file, and
lower layers never import higher ones (DESIGN.md §5)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "ajet"

# A module may not import these packages at all (lazily or not). `ajet.eval` (scoring a model) and
# `ajet.serving` (serving one) and `ajet.view` (browsing run folders) are commands on top: nothing they
# use imports them back. Above the training core sit the built-in workflows (`ajet.workflows`, which use
# the tool retriever, `ajet.retrieval`) and the MCP data generator (`ajet.generate`, which runs
# workflows): nothing below them imports them.
_COMMANDS = ("ajet.eval", "ajet.serving", "ajet.view", "ajet.cli")
_APPS = ("ajet.generate", "ajet.workflows", "ajet.retrieval")
_CORE = ("ajet.gateway", "ajet.engine", "ajet.rollout", "ajet.trainer", "ajet.tracker", "ajet.backbone", "ajet.judge")
FORBIDDEN = {
    "ajet.config": ("ajet.gateway", "ajet.engine", "ajet.rollout", "ajet.trainer", "ajet.tracker", "ajet.judge",
                    "ajet.backbone", *_APPS, *_COMMANDS),
    "ajet.tracker": ("ajet.gateway", "ajet.engine", "ajet.rollout", "ajet.trainer", "ajet.backbone", *_APPS, *_COMMANDS),
    "ajet.engine": ("ajet.gateway", "ajet.rollout", "ajet.trainer", "ajet.backbone", *_APPS, *_COMMANDS),
    "ajet.gateway": ("ajet.rollout", "ajet.trainer", "ajet.backbone", *_APPS, *_COMMANDS),
    "ajet.trainer": ("ajet.gateway", "ajet.rollout", "ajet.backbone", *_APPS, *_COMMANDS),
    "ajet.rollout": ("ajet.trainer", "ajet.backbone", *_APPS, *_COMMANDS),
    "ajet.judge": ("ajet.gateway", "ajet.engine", "ajet.rollout", "ajet.trainer", "ajet.backbone", *_APPS, *_COMMANDS),
    "ajet.algorithm": ("ajet.gateway", "ajet.engine", "ajet.rollout", "ajet.trainer", "ajet.backbone", *_APPS,
                       *_COMMANDS),
    "ajet.task_reader": ("ajet.rollout", "ajet.trainer", "ajet.backbone", *_APPS, *_COMMANDS),
    "ajet.backbone": (*_APPS, *_COMMANDS),
    "ajet.export": ("ajet.backbone", *_APPS, *_COMMANDS),
    "ajet.retrieval": ("ajet.workflows", "ajet.generate", *_COMMANDS),
    "ajet.workflows": ("ajet.generate", *_COMMANDS),
    "ajet.generate": ("ajet.eval", "ajet.cli"),
    # Serving is below evaluation: `ajet eval --benchmark bfcl` serves a local model, never the reverse.
    "ajet.serving": (*_APPS, "ajet.eval", "ajet.cli"),
    "ajet.eval": (*_APPS, "ajet.cli"),
    # The house's small shared rules, under everything: they import nothing of ajet's layers (the backbone
    # registry names the config's type in annotations only).
    **{low: (*_CORE, "ajet.config", *_APPS, *_COMMANDS) for low in (
        "ajet.loopback", "ajet.safejson", "ajet.safeyaml", "ajet.jsonl", "ajet.mcp_client", "ajet.runlock",
        "ajet.errors", "ajet.sandbox")},
    "ajet.backbones": (*_CORE, *_APPS, *_COMMANDS),
}
ALLOWED: set[tuple[str, str]] = set()


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


def _in_layer(module: str, layer: str) -> bool:
    return module == layer or module.startswith(layer + ".")


def test_lower_layers_never_import_higher_ones() -> None:
    bad = []
    for module, targets in _graph(top_level_only=False).items():
        for layer, forbidden in FORBIDDEN.items():
            if _in_layer(module, layer):
                bad += [(module, t) for t in targets
                        if any(_in_layer(t, f) for f in forbidden) and not _in_layer(t, layer)
                        and (module, t) not in ALLOWED]
    assert bad == []


def _resolved_imports(path: Path, modules: set[str]) -> set[str]:
    """The ajet modules a file imports anywhere in it (module level, in functions, under TYPE_CHECKING: a
    type-only import still ties the two files together), each resolved to the module file it names:
    `from ajet.x import y` is `ajet.x.y` when that is a module, else `ajet.x`."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name in modules)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the importing file's package
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            for alias in node.names:
                target = f"{base}.{alias.name}"
                if target in modules:
                    found.add(target)
                elif base in modules:
                    found.add(base)
    found.discard(name)
    return found


def test_no_two_files_import_each_other() -> None:
    """DESIGN.md §5: two files never import each other, at any level (lazily, in a function, for types):
    what both need moves into a third, lower file."""
    paths = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    imports = {name: _resolved_imports(path, set(paths)) for name, path in paths.items()}
    pairs = sorted({tuple(sorted((a, b))) for a, targets in imports.items() for b in targets
                    if a in imports.get(b, ())})
    assert pairs == [], "files that import each other: " + ", ".join(f"{a} <-> {b}" for a, b in pairs)


# A private name (`_x`) belongs to its file. None may be imported from another ajet module at present;
# add (importer, "module._name", reason) here only where a name truly must cross, and say why.
PRIVATE_ALLOWED: set[tuple[str, str]] = set()


def _private_imports(path: Path, modules: set[str]) -> set[str]:
    """`module._name` for every private name a file takes from another ajet module: imported by name
    (`from ajet.x import _y`), a private module (`import ajet.x._y`), or read off an imported module
    (`from ajet.x import y; y._z`)."""
    tree = ast.parse(path.read_text())
    found: set[str] = set()
    module_aliases: dict[str, str] = {}  # local name -> the ajet module it is bound to
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("ajet"):
                    found.update(alias.name for part in alias.name.split(".") if _private(part))
                    if alias.asname:
                        module_aliases[alias.asname] = alias.name
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("ajet"):
            found.update(f"{node.module}" for part in node.module.split(".") if _private(part))
            for alias in node.names:
                if _private(alias.name):
                    found.add(f"{node.module}.{alias.name}")
                elif f"{node.module}.{alias.name}" in modules:
                    module_aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                and node.value.id in module_aliases and _private(node.attr)):
            found.add(f"{module_aliases[node.value.id]}.{node.attr}")
    return found


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def test_no_private_name_crosses_a_file() -> None:
    paths = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    bad = sorted((name, target) for name, path in paths.items() for target in _private_imports(path, set(paths))
                 if (name, target) not in PRIVATE_ALLOWED)
    assert bad == [], "private names imported from another file: " + ", ".join(f"{a} takes {b}" for a, b in bad)


# One rule, one function (STYLE.md, checkable habits 9 and 11): names that were once written twice and
# drifted apart (the gateway's is_loopback missed [::1]; two numbers_in read "v2" differently).
ONE_DEFINITION = ("is_loopback", "host_header_is_loopback", "numbers_in", "parse_number", "write_jsonl", "read_rows",
                  "open_client", "resolve_api_key")


def test_each_shared_rule_is_defined_once() -> None:
    found: dict[str, list[str]] = {name: [] for name in ONE_DEFINITION}
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in found:
                found[node.name].append(_module_name(path))
    assert {name: len(where) for name, where in found.items()} == dict.fromkeys(ONE_DEFINITION, 1), found


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
