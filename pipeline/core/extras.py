"""Optional features and the pip extras that install them (pyproject.toml [project.optional-dependencies]): an
optional library is imported here, and its absence is one line naming the extra."""

from __future__ import annotations

import importlib
from types import ModuleType

from pipeline.core.errors import MissingExtra

# module -> (what it is called, the extra that installs it)
EXTRAS = {
    "ray": ("Ray", "ray"),
    "gymnasium": ("Gymnasium", "gym"),
    "inspect_ai": ("inspect_ai", "inspect"),
}


def optional(module: str, feature: str, otherwise: str = "") -> ModuleType:
    """The optional library `module`, imported for `feature`; MissingExtra ("<feature> needs Ray: pip install
    'telemetry-bench[ray]'", then `otherwise` in brackets) when it is not installed."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        name, extra = EXTRAS[module]
        also = f" ({otherwise})" if otherwise else ""
        raise MissingExtra(f"{feature} needs {name}: pip install 'telemetry-bench[{extra}]'{also}") from exc
