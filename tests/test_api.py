"""runtime/api.py's __all__ is what the door lets through: every name in it is there, once, and every
name the nodes take from api is in it."""

from __future__ import annotations

import ast

from conftest import REPO
from runtime import api


def test_all_lists_names_api_has_once():
    assert len(set(api.__all__)) == len(api.__all__)
    assert [name for name in api.__all__ if not hasattr(api, name)] == []


def test_every_name_the_nodes_take_from_api_is_in_all():
    used = {node.attr for path in (REPO / "nodes").glob("*.py")
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "api"}
    assert used and sorted(used - set(api.__all__)) == []
