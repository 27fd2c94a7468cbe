"""The point lexicon (configs/lexicon.toml): words in column and file names -> the Brick point class and QUDT unit
that `corpus draft` proposes for a stream (as `CHECK <Class>`, which the build refuses until a user confirms it)."""

from __future__ import annotations

import re

from pydantic import Field, field_validator

from contracts.base import Frozen


class LexiconEntry(Frozen):
    """One kind of point and the words that name it."""

    words: list[str] = Field(
        min_length=1,
        description="Phrases naming this point, lower case, words separated by spaces; a name matches a phrase when "
        "it holds every word of it (the phrase with the most words wins).",
    )
    point_class: str = Field(pattern=r"^[A-Z][A-Za-z0-9_.]*$", description="Brick class, e.g. 'CO2_Sensor'.")
    unit: str | None = Field(None, description="QUDT unit local name, e.g. 'PPM' (absent: no unit is proposed).")
    label: str = Field(description="What the stream measures, for its label: '<label> in {site}'.")

    @field_validator("words")
    @classmethod
    def _lower_words(cls, value: list[str]) -> list[str]:
        bad = [w for w in value if not re.fullmatch(r"[a-z0-9]+( [a-z0-9]+)*", w)]
        if bad:
            raise ValueError(f"words {bad}: write lower-case letters and digits, words separated by one space")
        return value


class PointLexicon(Frozen):
    """configs/lexicon.toml: the point classes `corpus draft` proposes, by the words of a stream's name."""

    points: dict[str, LexiconEntry] = Field(
        min_length=1, description="[points.<name>]: one kind of point; earlier entries win ties."
    )

    units: dict[str, str] = Field(
        default={},
        description="[units]: a unit as a column header writes it ('°F' in 'Value (°F)', 'in/wc') -> the QUDT unit "
        "local name the draft proposes for its stream; a written unit not listed is a TODO, never the lexicon's guess.",
    )
    states: dict[str, float] = Field(
        default={},
        description="[states]: the cell texts of binary and enumerated points (lower case: on, off, occupied...) -> "
        "the number each stands for; a column holding only these is a state stream (mapping [cleaning] states).",
    )

    @field_validator("states")
    @classmethod
    def _lower_states(cls, value: dict[str, float]) -> dict[str, float]:
        bad = [k for k in value if k != k.lower() or not k]
        if bad:
            raise ValueError(f"states {bad}: write each state in lower case (cells match it in any case)")
        return value
