"""Reading the YAML users write (recipes, train recipes, mixtures): safe, refusing a key given twice, and with
errors on one line that name the file.

Why refuse repeated keys: plain YAML keeps the last one, so a stage or setting written twice silently drops the
first (a whole `dedup:` block, a `trainer.lr`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml


class UniqueKeyLoader(yaml.SafeLoader):
    """YAML that refuses a key given twice in one mapping (plain YAML keeps the last, dropping a whole stage).

    The check walks the composed node tree before anything is constructed: construction merges `<<: *anchor`
    into the anchored node in place, after which a key overridden next to a merge would look repeated.
    """

    def construct_document(self, node: yaml.Node) -> Any:
        _refuse_repeated_keys(node, set())
        return super().construct_document(node)


def _refuse_repeated_keys(node: yaml.Node, seen_nodes: set[int]) -> None:
    if id(node) in seen_nodes:  # an alias: the same node, checked once
        return
    seen_nodes.add(id(node))
    if isinstance(node, yaml.MappingNode):
        keys: set[Any] = set()
        for key_node, value_node in node.value:
            if key_node.tag != "tag:yaml.org,2002:merge" and isinstance(key_node, yaml.ScalarNode):
                if key_node.value in keys:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"{key_node.value!r} is given twice in one mapping", key_node.start_mark
                    )
                keys.add(key_node.value)
            _refuse_repeated_keys(value_node, seen_nodes)
    elif isinstance(node, yaml.SequenceNode):
        for item in node.value:
            _refuse_repeated_keys(item, seen_nodes)


def load_yaml(text: str, path: str | Path) -> Any:
    """The YAML document TEXT (read from PATH); ValueError `PATH: not valid YAML: ...` on one line."""
    try:
        return yaml.load(text, Loader=UniqueKeyLoader)  # noqa: S506 (a SafeLoader)
    except yaml.YAMLError as err:
        message = " ".join(str(err).replace('"<unicode string>"', str(path)).split())
        raise ValueError(f"{path}: not valid YAML: {message}") from None
