"""docs/ingest.md's key reference is generated from the mapping contract: every key has a description, and the
committed section is what `telemetry-bench schemas` writes."""

from __future__ import annotations

from click.testing import CliRunner

from pipeline.cli import main
from pipeline.harness.schemas import (
    INGEST_DOC,
    REFERENCE_BEGIN,
    mapping_models,
    mapping_reference,
    stale,
    undocumented_keys,
)
from tests.helpers import REPO


def test_every_mapping_key_is_documented():
    assert undocumented_keys() == []


def test_the_reference_names_every_key_of_every_table():
    reference = mapping_reference()
    for _, model in mapping_models():
        for key in model.model_fields:
            assert f"| `{key}` |" in reference, f"{model.__name__}.{key}"
    assert "header" in reference and "decimal" in reference and "location" in reference


def test_the_committed_docs_are_generated():
    assert REFERENCE_BEGIN in (REPO / INGEST_DOC).read_text(encoding="utf-8")
    assert stale(REPO / "contracts" / "schemas") == []
    result = CliRunner().invoke(main, ["--root", str(REPO), "schemas", "--check"])
    assert result.exit_code == 0, result.output
