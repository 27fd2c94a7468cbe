"""The answer contract: what each question asks for (an answer form), how answers are graded, and why one is rejected.

configs/answers.toml declares the catalogue (field types and meanings, code tables with a one-line meaning per
code, units with their pint names and symbols, the default tolerance). Each phase and follow-up of an episode
carries the AnswerForm built from it, so the agent is shown, and the scorer grades, exactly the same contract.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from contracts.base import Frozen

FieldType = Literal["number", "timestamp", "stream_id", "stream_ids", "code"]
RejectReason = Literal["format_error", "wrong_unit", "wrong_value", "wrong_choice"]
REJECT_REASONS: tuple[str, ...] = ("format_error", "wrong_unit", "wrong_value", "wrong_choice")


class Tolerance(Frozen):
    """A number passes when |answer - gold| <= max(abs, rel * |gold|), in the field's unit."""

    abs: float = Field(ge=0, description="Absolute tolerance, in the field's unit.")
    rel: float = Field(ge=0, description="Relative tolerance, a share of |gold|.")

    def allows(self, gold: float) -> float:
        return max(self.abs, self.rel * abs(gold))


class Unit(Frozen):
    """A unit as the metadata names it (a QUDT code), for pint and for people."""

    pint: str = Field(description="The unit's pint expression, e.g. 'degree_Celsius', 'kilowatt', 'liter / second'.")
    symbols: list[str] = Field(
        default=[], description="Spellings an answer may use; the first is shown (else the code)."
    )


class FieldSpec(Frozen):
    """One answer field of the catalogue: its type and what it means."""

    type: FieldType
    description: str = Field(description="What the field holds, in one line.")
    unit: str | None = Field(None, description="Numbers: 'stream' (the unit of the stream asked about) or a unit code.")
    codes: str | None = Field(None, description="Code fields: the name of their code table.")
    tolerance: Tolerance | None = Field(None, description="Numbers: overrides the default tolerance for this field.")

    @model_validator(mode="after")
    def _typed(self) -> FieldSpec:
        if (self.type == "code") != (self.codes is not None):
            raise ValueError("code fields, and only they, name a code table (codes = ...)")
        if self.type != "number" and (self.unit or self.tolerance):
            raise ValueError("only number fields have a unit or a tolerance")
        return self


class AnswersConfig(Frozen):
    """The whole of configs/answers.toml."""

    default_tolerance: Tolerance
    units: dict[str, Unit] = Field(description="Unit code (QUDT, as in the metadata) -> pint unit and symbols.")
    fields: dict[str, FieldSpec]
    codes: dict[str, dict[str, str]] = Field(
        description="Code table -> code -> its one-line meaning (every code possible)."
    )

    @model_validator(mode="after")
    def _tables_exist(self) -> AnswersConfig:
        for name, spec in self.fields.items():
            if spec.codes is not None and spec.codes not in self.codes:
                raise ValueError(f"field {name}: no code table {spec.codes!r}")
            if spec.unit not in (None, "stream") and spec.unit not in self.units:
                raise ValueError(f"field {name}: unit {spec.unit!r} is not declared under [units]")
        return self


class FormField(Frozen):
    """One field of an answer form, with everything needed to answer and to grade it."""

    name: str
    type: FieldType
    description: str = Field(description="Its meaning and how it is graded, in plain words.")
    unit: str | None = Field(
        None, description="Numbers: the unit code the value is expected in (None: a plain number)."
    )
    unit_symbols: list[str] = Field(default=[], description="Spellings of that unit an answer may use beside the code.")
    pint_unit: str | None = Field(
        None, description="The unit for pint; answers in another unit of its dimension are converted."
    )
    tolerance: Tolerance | None = None
    codes: dict[str, str] = Field(default={}, description="Code fields: every possible code -> its meaning.")

    @property
    def unit_label(self) -> str | None:
        return (self.unit_symbols[0] if self.unit_symbols else self.unit) if self.unit else None


TYPE_WORDS = {
    "number": "a number",
    "timestamp": "an ISO 8601 timestamp with Z or an offset",
    "stream_id": "a stream id",
    "stream_ids": "a list of stream ids",
}


class AnswerForm(Frozen):
    """What one question asks for: the fields to answer, their types, units, codes and grading rules."""

    fields: list[FormField] = Field(min_length=1)

    @property
    def names(self) -> list[str]:
        return [f.name for f in self.fields]

    def field(self, name: str) -> FormField:
        return next(f for f in self.fields if f.name == name)

    def json_schema(self) -> dict:
        """The fields as a JSON Schema object (every field required; codes as enums)."""
        properties: dict[str, dict] = {}
        for f in self.fields:
            if f.type == "number":
                unit = f" Unit: {f.unit_label} ({f.unit})." if f.unit else ""
                prop = {
                    "type": ["number", "string"],
                    "description": f"{f.description}{unit} A number, or a string with a unit.",
                }
            elif f.type == "timestamp":
                prop = {"type": "string", "format": "date-time", "description": f.description}
            elif f.type == "stream_ids":
                prop = {"type": "array", "items": {"type": "string"}, "description": f.description}
            elif f.type == "code":
                meanings = " ".join(f"{code}: {meaning}" for code, meaning in f.codes.items())
                prop = {"type": "string", "enum": list(f.codes), "description": f"{f.description} {meanings}"}
            else:
                prop = {"type": "string", "description": f.description}
            properties[f.name] = prop
        return {"type": "object", "properties": properties, "required": self.names, "additionalProperties": True}

    def sentence(self) -> str:
        """The one plain sentence appended to the user's message: 'Reply with `mean`, in °C.'"""
        parts = []
        for f in self.fields:
            if f.type == "number":
                parts.append(f"`{f.name}`" + (f" in {f.unit_label}" if f.unit else ""))
            elif f.type == "code":
                parts.append(f"`{f.name}` (one of {', '.join(f.codes)})")
            else:
                parts.append(f"`{f.name}` ({TYPE_WORDS[f.type]})")
        listed = parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
        return f"Reply with {listed}."


class Rejection(Frozen):
    """Why one field of one answer did not pass."""

    step: int = Field(description="Which answer: phases first, then follow-ups (0-based).")
    field: str
    reason: RejectReason
    detail: str = Field(description="What was wrong, in plain words.")
