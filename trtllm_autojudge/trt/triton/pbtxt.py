"""Write protobuf text format (Triton's ``config.pbtxt``) from plain Python values.

A message is a dict; a repeated field is a list (of dicts for messages, of scalars otherwise); an
enum value is an :class:`Enum`; a ``map<string, ModelParameter>`` is written as repeated
``key``/``value`` entries by :func:`parameters`.
"""
from __future__ import annotations

import json
from dataclasses import dataclass


@dataclass(frozen=True)
class Enum:
    name: str  # e.g. "TYPE_INT32", "KIND_GPU"


def parameters(values: dict[str, str]) -> list[dict]:
    """Triton model ``parameters`` (``map<string, ModelParameter>``) from string values."""
    return [{"key": k, "value": {"string_value": str(v)}} for k, v in values.items()]


def _scalar(v) -> str:
    if isinstance(v, Enum):
        return v.name
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)  # a JSON string literal is a valid protobuf text string literal for ASCII text
    raise TypeError(f"cannot write {type(v).__name__} {v!r} as a protobuf text scalar")


def to_pbtxt(message: dict, indent: int = 0) -> str:
    pad = "  " * indent
    lines = []
    for key, value in message.items():
        if isinstance(value, dict):
            lines.append(f"{pad}{key} {{\n{to_pbtxt(value, indent + 1)}{pad}}}")
        elif isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            for item in value:
                lines.append(f"{pad}{key} {{\n{to_pbtxt(item, indent + 1)}{pad}}}")
        elif isinstance(value, list):
            lines.append(f"{pad}{key}: [ {', '.join(_scalar(v) for v in value)} ]")
        else:
            lines.append(f"{pad}{key}: {_scalar(value)}")
    return "".join(line + "\n" for line in lines)
