"""The tool table of docs/tools.md, generated from the registry's schemas so that it cannot drift from them."""

from __future__ import annotations

from pipeline.tools import registry

TOOLS_DOC = "docs/tools.md"
TOOLS_BEGIN = (
    "<!-- tool-arguments:begin (generated from the tool registry by `telemetry-bench schemas`; do not edit) -->"
)
TOOLS_END = "<!-- tool-arguments:end -->"


def _argument(name: str, spec: dict, required: bool) -> str:
    """`name`, `name?` when optional, with its allowed values (and default) when the schema lists them."""
    text = f"`{name}`" if required else f"`{name}?`"
    choices, default = spec.get("enum"), spec.get("default")
    if choices:
        return text + " (" + " \\| ".join(f"**{c}**" if c == default else str(c) for c in choices) + ")"
    return text + (f" (**{default}**)" if default is not None else "")


def argument_names(tool: registry.Tool) -> list[str]:
    """The tool's arguments as its input schema declares them: required first, each group in declared order."""
    schema = tool.input_schema()
    required = schema.get("required", [])
    return [*required, *(name for name in schema["properties"] if name not in required)]


def tools_reference() -> str:
    """One row per tool: its arguments (from the input schema) and the fields of its result (from the output model)."""
    lines = [
        TOOLS_BEGIN,
        "",
        "| tool | arguments (`?` optional; default in bold) | result |",
        "|---|---|---|",
    ]
    for tool in registry.TOOLS:
        schema = tool.input_schema()
        required = set(schema.get("required", []))
        arguments = ", ".join(_argument(n, schema["properties"][n], n in required) for n in argument_names(tool))
        fields = ", ".join(f"`{name}`" for name in tool.output_model.model_fields)
        about = (tool.output_model.__doc__ or "").strip().splitlines()[0].replace("|", "\\|")
        lines.append(f"| {tool.name} | {arguments} | {fields}: {about} |")
    return "\n".join([*lines, "", TOOLS_END])
