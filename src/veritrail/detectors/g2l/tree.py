"""G2LDetect's global tree: its reply schema, its record, its lenient reader and its paths.

The model's tree reply is read by `parse_tree` (used as the `validate` of the tree request, so an
unusable tree is re-asked within the model's bound); `tree_paths` turns a tree into its
root-to-leaf paths, one per leaf. Nothing here calls a model.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

TREE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"tree": {"$ref": "#/$defs/node"}},
    "required": ["tree"],
    "additionalProperties": False,
    "$defs": {
        "node": {
            "type": "object",
            "properties": {
                "text": {"type": "string"},
                "children": {"type": "array", "items": {"$ref": "#/$defs/node"}},
            },
            "required": ["text", "children"],
            "additionalProperties": False,
        }
    },
}


@dataclass(frozen=True, slots=True)
class TreeNode:
    """One node of the global tree. An empty `text` marks a synthetic root (several top nodes)."""

    text: str
    children: tuple[TreeNode, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """`{"text", "children"}` recursively (the schema's shape)."""
        return {"text": self.text, "children": [c.to_json() for c in self.children]}

    def leaves(self) -> list[TreeNode]:
        """The leaves, in depth-first order."""
        if not self.children:
            return [self]
        return [leaf for c in self.children for leaf in c.leaves()]

    def size(self) -> int:
        """Number of nodes."""
        return 1 + sum(c.size() for c in self.children)

    def depth(self) -> int:
        """Number of levels (a lone root has depth 1)."""
        return 1 + max((c.depth() for c in self.children), default=0)


# -- tree parsing -----------------------------------------------------------------------------

_TEXT_KEYS = ("text", "theme", "name", "label", "title", "topic", "content", "value", "detail")
_CHILD_KEYS = ("children", "branches", "subbranches", "details", "leaves", "items", "nodes")


class TreeError(ValueError):
    """The reply does not hold a usable tree."""


def _scalar(value: Any) -> str | None:
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    return None


def _nodes(value: Any, depth: int, limit: int) -> list[TreeNode]:
    if depth > limit:
        raise TreeError(f"tree deeper than {limit} levels")
    s = _scalar(value)
    if s is not None:
        return [TreeNode(s)] if s else []
    if value is None:
        return []
    if isinstance(value, list):
        return [n for item in value for n in _nodes(item, depth, limit)]
    if isinstance(value, Mapping):
        text_key = next((k for k in _TEXT_KEYS if k in value), None)
        if text_key is not None:
            text = _scalar(value[text_key])
            if text is None:
                raise TreeError(f"node field {text_key!r} is not text")
            kids: list[TreeNode] = []
            for k in _CHILD_KEYS:
                if k in value:
                    kids.extend(_nodes(value[k], depth + 1, limit))
            if not text:
                if not kids:
                    return []
                raise TreeError("a node with children has empty text")
            return [TreeNode(text, tuple(kids))]
        # {"subject": {...}, "other subject": [...]}: keys are node texts, values their children.
        return [
            TreeNode(str(k).strip(), tuple(_nodes(v, depth + 1, limit)))
            for k, v in value.items()
            if str(k).strip()
        ]
    raise TreeError(f"unexpected JSON value in tree: {type(value).__name__}")


_PLACEHOLDER = re.compile(r"<[^<>]{1,40}>")


def _texts(node: TreeNode) -> list[str]:
    return [node.text, *(t for c in node.children for t in _texts(c))]


def parse_tree(value: Any, *, max_depth: int = 8, max_nodes: int = 300) -> TreeNode:
    """Read a tree from a decoded reply, leniently; raise `TreeError` when there is none.

    Accepted: `{"tree": node}` or a bare node, where a node is `{"text": ..., "children": [...]}`
    (a few synonyms of both keys are read too), a plain string (a leaf), a list of nodes, or an
    object whose keys are node texts and whose values are their children. `{"tree": "<JSON>"}`
    with the tree serialised inside a string is decoded. Several top-level nodes are placed under
    a synthetic root with empty text (skipped in paths).
    """
    if isinstance(value, Mapping) and "tree" in value:
        value = value["tree"]
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            raise TreeError("the tree is plain text, not a JSON structure") from None
        if isinstance(value, Mapping) and "tree" in value:
            value = value["tree"]
    tops = _nodes(value, 1, max_depth)
    if not tops:
        raise TreeError("the tree is empty")
    if any(_PLACEHOLDER.fullmatch(t) for n in tops for t in _texts(n)):
        # Weak models copy the shape shown in the prompt verbatim; that is no tree of the text.
        raise TreeError(
            "the tree repeats the format's <placeholders> instead of the text's content"
        )
    root = tops[0] if len(tops) == 1 else TreeNode("", tuple(tops))
    if root.size() > max_nodes:
        raise TreeError(f"tree has {root.size()} nodes, more than {max_nodes}")
    if root.depth() > max_depth:
        raise TreeError(f"tree deeper than {max_depth} levels")
    return root


def tree_paths(root: TreeNode) -> list[tuple[str, ...]]:
    """Every root-to-leaf path as the node texts along it (synthetic empty root left out).

    One path per leaf, in depth-first order, so `len(tree_paths(t)) == len(t.leaves())`.
    """
    out: list[tuple[str, ...]] = []

    def walk(node: TreeNode, prefix: tuple[str, ...]) -> None:
        here = (*prefix, node.text) if node.text else prefix
        if not node.children:
            out.append(here)
            return
        for c in node.children:
            walk(c, here)

    walk(root, ())
    return out


__all__ = ["TREE_SCHEMA", "TreeError", "TreeNode", "parse_tree", "tree_paths"]
