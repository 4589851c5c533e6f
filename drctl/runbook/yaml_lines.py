"""YAML that remembers line numbers, so validation messages can say `file:line`.

Duplicate keys are errors here (plain PyYAML keeps the last one silently).
"""

from __future__ import annotations

from typing import Any

import yaml


class LineDict(dict[Any, Any]):
    """A YAML mapping that remembers where it and each of its values start."""

    line: int = 0
    value_lines: dict[Any, int]


class LineList(list[Any]):
    """A YAML sequence that remembers where it and each of its items start."""

    line: int = 0
    item_lines: list[int]


def _value_line(node: yaml.Node) -> int:
    line = node.start_mark.line + 1
    # A block scalar's text starts on the line after its `|` or `>`.
    if isinstance(node, yaml.ScalarNode) and node.style in ("|", ">"):
        line += 1
    return line


class _LineLoader(yaml.SafeLoader):
    pass


def _construct_mapping(loader: yaml.SafeLoader, node: yaml.MappingNode) -> LineDict:
    loader.flatten_mapping(node)
    mapping = LineDict()
    mapping.line = node.start_mark.line + 1
    mapping.value_lines = {}
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        try:
            duplicate = key in mapping
        except TypeError:
            raise yaml.constructor.ConstructorError(
                None, None, "a mapping key must be a plain value", key_node.start_mark) from None
        if duplicate:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key '{key}'", key_node.start_mark)
        mapping[key] = loader.construct_object(value_node, deep=True)
        mapping.value_lines[key] = _value_line(value_node)
    return mapping


def _construct_sequence(loader: yaml.SafeLoader, node: yaml.SequenceNode) -> LineList:
    items = LineList(loader.construct_object(child, deep=True) for child in node.value)
    items.line = node.start_mark.line + 1
    items.item_lines = [_value_line(child) for child in node.value]
    return items


_LineLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)
_LineLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_SEQUENCE_TAG, _construct_sequence)


def line_of(container: Any, key: Any, default: int | None) -> int | None:
    """Where `container[key]` starts, if the YAML said; else `default`."""
    if isinstance(container, LineDict):
        return container.value_lines.get(key, default)
    if isinstance(container, LineList) and isinstance(key, int) and key < len(
            container.item_lines):
        return container.item_lines[key]
    return default


def load_with_lines(source: str) -> Any:
    """Safe YAML whose mappings and lists are `LineDict`/`LineList`; raises yaml.YAMLError."""
    return yaml.load(source, Loader=_LineLoader)
