"""YAML that comes from outside (a `--conf` file, a run folder's config.yaml): read with its aliases bounded.

A YAML alias (`*a`) repeats the node its anchor (`&a`) names, so nine lines of anchors, each a list of
ten aliases of the one before, stand for 10^9 leaves in under 400 bytes. PyYAML itself keeps them shared,
but whatever walks or copies the value expands them: OmegaConf took 10.7 s for 10^4 leaves and did not
finish 10^6 in two minutes, and `ajet view` answered 12.4 MB for a 387-byte config.yaml. So before any
of that, the node graph is composed (aliases still shared, cheap) and the nodes the aliases would add
are counted; past `MAX_ALIAS_NODES`, or an alias inside its own anchor, the text is refused.
"""

from __future__ import annotations

from typing import Any

import yaml

MAX_ALIAS_NODES = 1_000  # nodes that aliases may add to a document; configs that use aliases add a few dozen


class YAMLProblem(ValueError):
    """YAML that ajet does not read; the message says why."""


def check_aliases(text: str | bytes, max_alias_nodes: int = MAX_ALIAS_NODES) -> None:
    """Raise YAMLProblem when the aliases of `text` expand it by more than `max_alias_nodes` nodes, or
    an alias refers to a node that contains it. yaml.YAMLError for text that is not YAML."""
    if isinstance(text, bytes):
        text = text.decode("utf-8")
    if "*" not in text:  # no alias at all: nothing to expand
        return
    for root in yaml.compose_all(text, Loader=yaml.SafeLoader):
        if root is not None:
            expanded, distinct = _sizes(root)
            if expanded - distinct > max_alias_nodes:
                raise YAMLProblem(f"its aliases (*name) expand it by {expanded - distinct:,} nodes, over the "
                                  f"limit of {max_alias_nodes:,}: an alias bomb, or a config to write out in full")


def safe_load(text: str | bytes, max_alias_nodes: int = MAX_ALIAS_NODES) -> Any:
    """`yaml.safe_load` after `check_aliases`."""
    check_aliases(text, max_alias_nodes)
    return yaml.safe_load(text)


def _sizes(root: yaml.Node) -> tuple[int, int]:
    """(nodes with every alias expanded, distinct nodes), iteratively; YAMLProblem on a cycle. Each node's
    expanded size is computed once (memo), so this is linear in the distinct nodes."""
    size: dict[int, int] = {}
    on_path: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        children = _children(node)
        if done:
            on_path.discard(key)
            size[key] = 1 + sum(size[id(c)] for c in children)
            continue
        if key in size:
            continue
        if key in on_path:
            raise YAMLProblem("an alias refers to a node that contains it (a recursive structure)")
        on_path.add(key)
        stack.append((node, True))
        for child in children:
            if id(child) in on_path:
                raise YAMLProblem("an alias refers to a node that contains it (a recursive structure)")
            if id(child) not in size:
                stack.append((child, False))
    return size[id(root)], len(size)


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []
