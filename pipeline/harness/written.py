"""What a build refuses in a mapping before it reads a file: a key `corpus draft` left TODO or CHECK, and a license
no dataset card can name (pipeline/release/card.py)."""

from __future__ import annotations

from contracts.corpus import CorpusMapping
from pipeline.core.config import load_hub_licenses
from pipeline.core.errors import ConfigError
from pipeline.core.workspace import Workspace

DRAFTED_KEYS = ("title", "license", "license_url", "citation")  # keys `corpus draft` writes as TODO


def check_written(ws: Workspace, mapping: CorpusMapping) -> None:
    """What a build refuses before it reads a file: a key the draft left TODO, a license no card can name."""
    from pipeline.release.card import license_id

    todo = [key for key in DRAFTED_KEYS if getattr(mapping, key).lstrip().startswith("TODO")]
    if todo:
        raise ConfigError(
            f"{ws.corpus_config(mapping.name)}: {', '.join(todo)} still say TODO; write them (license: an SPDX "
            "identifier such as CC-BY-4.0; license_url: where its text is, or empty; citation: how to credit the data)"
        )
    guessed = [key for key, value in _time_guesses(mapping) if value.startswith("CHECK ")]
    if guessed:
        raise ConfigError(
            f"{ws.corpus_config(mapping.name)}: {', '.join(guessed)} still say CHECK (a guess of `corpus draft`); "
            "confirm each by deleting 'CHECK ', or write the right value"
        )
    license_id(mapping, load_hub_licenses(ws))


def _time_guesses(mapping: CorpusMapping) -> list[tuple[str, str]]:
    """The mapping keys where a draft writes a CHECK (time formats and zones, zero-dropout classes), with their
    values."""
    keys = [("time.format", mapping.time.format), ("time.timezone", mapping.time.timezone)]
    for index, entry in enumerate(mapping.time.file_formats, 1):
        keys += [(f"time.file_formats[{index}].format", entry.format)]
        keys += [(f"time.file_formats[{index}].timezone", entry.timezone or "")]
    keys += [("cleaning.zero_dropout_classes", c) for c in mapping.cleaning.zero_dropout_classes]
    return keys
