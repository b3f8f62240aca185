"""YAML read strictly: a key given twice in one mapping is an error, not "the second one wins".

PyYAML's ``safe_load`` keeps the last of two equal keys without a word, so a spec file that names a policy
twice silently runs only one of them. ``load_yaml`` uses PyYAML's safe loader with that one check added.
"""

from __future__ import annotations

from typing import Any

import yaml

__all__ = ["DuplicateKeyError", "load_yaml"]


class DuplicateKeyError(yaml.constructor.ConstructorError):
    """A mapping names the same key twice."""


class _UniqueKeyLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that refuses a key repeated within one mapping."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        """The mapping of ``node``; ``DuplicateKeyError`` (with the line) for a key given twice."""
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            try:
                first = seen.setdefault(key, key_node.start_mark.line + 1)
            except TypeError:  # an unhashable key: the base class reports it
                continue
            if first != key_node.start_mark.line + 1:
                raise DuplicateKeyError(None, None, f"the key {key!r} is given twice (first on line {first}); "
                                                    "give each key once", key_node.start_mark)
        return super().construct_mapping(node, deep=deep)


def load_yaml(text: str) -> Any:
    """``yaml.safe_load(text)``, refusing a key given twice in one mapping (``DuplicateKeyError``)."""
    return yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 - a SafeLoader subclass
