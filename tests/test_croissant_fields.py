"""croissant.json declares only what the episodes hold (issue 44): a corpus whose episodes carry no difficulty keys
(a short synthetic BTS corpus) gets no difficulty field, where mlcroissant refused a field with neither a type nor
sub-fields; and a Croissant validation failure is one line naming the field."""

from __future__ import annotations

import json

import pytest

from pipeline.core.config import load_mapping
from pipeline.core.errors import StageError
from pipeline.release import croissant as croissant_module
from pipeline.release.croissant import croissant
from tests.helpers import REPO


def _inputs():
    mapping = load_mapping(REPO / "configs" / "corpora" / "xai4heat.toml")
    manifest = json.loads((REPO / "artifacts" / "xai4heat" / "release" / "release.json").read_text(encoding="utf-8"))
    return mapping, manifest


def test_episodes_without_difficulty_keys_have_no_difficulty_field():
    mapping, manifest = _inputs()
    metadata = croissant(mapping, manifest, [])
    for record_set in metadata["recordSet"]:
        assert not [f for f in record_set["field"] if f["name"] == "difficulty"]
        assert "difficulty" in record_set["description"]  # named among the parts not typed here
    with_keys = croissant(mapping, manifest, ["tool_calls"])
    assert [f["name"] for f in with_keys["recordSet"][0]["field"] if f["name"] == "difficulty"] == ["difficulty"]


def test_a_validation_failure_is_one_line_naming_the_field(monkeypatch):
    mapping, manifest = _inputs()
    original = croissant_module._Fields.of_episode

    def untyped_difficulty(self, name, info):
        if name == "difficulty":  # what 0.x wrote for no keys: a field with neither a type nor sub-fields
            return self.field(self.split, name, None, "", name, sub_fields=[])
        return original(self, name, info)

    monkeypatch.setattr(croissant_module._Fields, "of_episode", untyped_difficulty)
    with pytest.raises(StageError) as caught:
        croissant(mapping, manifest, [])
    message = str(caught.value)
    assert "\n" not in message and message.startswith("xai4heat: croissant.json does not validate: ")
    assert "Field(difficulty)" in message and "dataType" in message
