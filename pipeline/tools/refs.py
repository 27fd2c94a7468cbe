"""References to earlier tool outputs inside arguments: "$c1.stream_id", "$c1.stream_ids[0]",
"$c2.matches[1].stream_id"."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from pipeline.core.errors import ReferenceError_

# A call id as providers write them: c1, call_abc, chatcmpl-tool-1f2e (vLLM), toolu_01A (Anthropic via OpenRouter), ...
REFERENCE = re.compile(r"^\$(?P<call>[A-Za-z0-9_][A-Za-z0-9_:\-]*)(?P<path>(?:\.[A-Za-z_][A-Za-z0-9_]*|\[\d+\])*)$")
STEP = re.compile(r"\.([A-Za-z_][A-Za-z0-9_]*)|\[(\d+)\]")


def _follow(value: Any, path: str, text: str, argument: str) -> Any:
    for field, index in STEP.findall(path):
        if field:
            if not isinstance(value, Mapping) or field not in value:
                raise ReferenceError_(f"{text}: the output has no field {field!r}", argument)
            value = value[field]
        else:
            position = int(index)
            if not isinstance(value, list) or position >= len(value):
                raise ReferenceError_(f"{text}: index [{position}] is out of range", argument)
            value = value[position]
    return value


def resolve(arguments: Any, outputs: Mapping[str, Any], where: str = "") -> Any:
    """Replace every string that is exactly a reference by the value it points to; other values stay."""
    if isinstance(arguments, str):
        match = REFERENCE.match(arguments)
        if not match:
            return arguments
        call = match["call"]
        if call not in outputs:
            known = ", ".join(sorted(outputs)) or "none yet"
            raise ReferenceError_(f"{arguments}: no earlier call {call!r} (calls so far: {known})", where or arguments)
        return _follow(outputs[call], match["path"], arguments, where or arguments)
    if isinstance(arguments, Mapping):
        return {
            key: resolve(value, outputs, f"{where}.{key}" if where else str(key)) for key, value in arguments.items()
        }
    if isinstance(arguments, list):
        return [resolve(value, outputs, f"{where}[{i}]") for i, value in enumerate(arguments)]
    return arguments
