"""A tool's input schema from its pydantic model, as the Messages API takes it (no titles).

Made once per model: pydantic builds a JSON schema afresh on every call (about 1 ms), and
every session's toolbox asks for the same few. Each caller gets its own copy to change."""

from __future__ import annotations

import copy
from functools import cache
from typing import Any

from pydantic import BaseModel


def input_schema(model: type[BaseModel]) -> dict[str, Any]:
    return copy.deepcopy(_made(model))


@cache
def _made(model: type[BaseModel]) -> dict[str, Any]:
    schema = model.model_json_schema()
    schema.pop("title", None)
    for prop in schema.get("properties", {}).values():
        prop.pop("title", None)
    return schema
