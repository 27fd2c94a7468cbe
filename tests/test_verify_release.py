"""verify --release trusts nothing of release.json it can recompute, and release.json's own digest covers the rest:
every tampering of issue 25 item 7 is one named problem (or one error line), never a traceback or a pass."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipeline.core.canonical import digest_value, pretty_json
from pipeline.release.verify import verify_release
from tests.helpers import fuzz_settings, verify_cli


def edit(folder, change, *, redigest=False, name="release.json"):
    """Change release.json (or manifest.json) as a careless editor would: parsed, changed, written back as the build
    writes it; with redigest, as a careful one would, recomputing release.json's own digest too."""
    path = folder / name
    manifest = json.loads(path.read_text())
    change(manifest)
    if redigest:
        manifest["manifest_xxh3"] = digest_value({k: v for k, v in manifest.items() if k != "manifest_xxh3"})
    path.write_text(pretty_json(manifest))


def one_line_error(folder, *expected):
    result = verify_cli(folder)
    assert result.exit_code == 1 and "Traceback" not in result.output, result.output
    assert all(any(e in line for line in result.output.splitlines()) for e in expected), result.output
    return result.output


def test_a_syntax_break_is_one_line(release):
    path = release / "release.json"
    text = path.read_text()
    path.write_text(text.replace('"files": {', '"files" {', 1))
    output = one_line_error(release, "release.json: not valid JSON (line", "restore it from the release")
    assert len(output.strip().splitlines()) == 2  # the problem, then the error line that repeats it


def test_a_renamed_key_or_a_wrong_type_is_one_line(release):
    edit(release, lambda m: m.update(file=m.pop("files")))
    one_line_error(release, "release.json: no files (dict) key")
    edit(release, lambda m: m.update(files=["train.jsonl"], counts=None))
    one_line_error(release, "release.json: no files (dict), counts (dict) key")


def test_not_an_object_and_not_utf8(release):
    (release / "release.json").write_text("[1, 2]")
    one_line_error(release, "release.json: not a JSON object")
    (release / "release.json").write_bytes(b'{"files": "\xff"}')
    one_line_error(release, "release.json: not UTF-8 text")


def test_a_name_outside_the_folder_is_refused(release):
    outside = {"bytes": 1, "sha256": "0", "xxh3": "0"}
    edit(release, lambda m: m["files"].update({"../../etc/passwd": outside}), redigest=True)
    one_line_error(release, "not a file entry of a relative path inside the folder")


@pytest.mark.parametrize(
    "claim", ["raw_inputs", "tool_registry_version", "libraries", "stages", "license", "metadata_inputs"]
)
def test_an_edit_of_a_claim_that_cannot_be_recomputed_breaks_the_own_digest(release, claim):
    def change(manifest):
        value = manifest[claim]
        if isinstance(value, dict) and value:
            key = sorted(value)[0]
            value[key] = {"edited": True} if isinstance(value[key], dict) else f"{value[key]}0"
        elif isinstance(value, dict):
            value["edited"] = "1"
        else:
            manifest[claim] = f"{value}0"

    edit(release, change)
    one_line_error(release, "its content differs from its own digest (manifest_xxh3)")


@pytest.mark.parametrize("key", ["family", "split", "interaction_mode", "commitment_outcome", "family_x_split"])
def test_counts_are_recomputed_even_when_the_digest_is(release, key):
    def change(manifest):
        counts = manifest["counts"][key]
        first = sorted(counts)[0]
        if isinstance(counts[first], dict):
            counts[first]["train"] += 1
        else:
            counts[first] += 1

    edit(release, change, redigest=True)
    one_line_error(release, f"counts.{key}", "disagree with the split files")


def test_thresholds_are_checked_against_the_store_table(release):
    def change(manifest):
        name = sorted(manifest["thresholds"])[0]
        manifest["thresholds"][name] = manifest["thresholds"][name] + 1

    edit(release, change, redigest=True)
    one_line_error(release, "thresholds", "disagree with store/thresholds.parquet")


def test_spacing_of_release_json_is_part_of_it(release):
    path = release / "release.json"
    path.write_text(path.read_text().replace('\n  "corpus"', '\n   "corpus"', 1))
    one_line_error(release, "release.json: not as the build writes it")


@pytest.mark.parametrize(
    "field",
    ["cache_key", "code_version", "config_hash", "libraries", "inputs", "row_counts", "details", "logical_digests"],
)
def test_manifest_json_claims_are_checked(release, field):
    def change(stage):
        value = stage[field]
        if isinstance(value, dict) and value:
            key = sorted(value)[0]
            value[key] = (
                {"edited": 1}
                if isinstance(value[key], dict)
                else (value[key] + 1 if isinstance(value[key], int) else f"{value[key]}0")
            )
        elif isinstance(value, dict):
            value["x"] = "0"
        else:
            stage[field] = f"{value}0"

    edit(release, change, name="manifest.json")
    one_line_error(release, "manifest.json: ", "disagree with release.json")


def test_a_missing_or_broken_manifest_json(release):
    (release / "manifest.json").write_text("{}")
    one_line_error(release, "manifest.json: not a stage manifest")
    (release / "manifest.json").unlink()
    one_line_error(release, "manifest.json: missing")


def test_unknown_files_are_refused_hub_extras_are_not(release):
    (release / ".gitattributes").write_text("*.parquet filter=lfs\n")
    (release / ".cache" / "huggingface").mkdir(parents=True)
    (release / ".cache" / "huggingface" / "download.lock").write_text("")
    assert verify_release(release) == []
    (release / "store" / "extra.parquet").write_bytes(b"PAR1")
    one_line_error(release, "store/extra.parquet: not part of the release")


def flips(release, files, chosen_settings):
    """Flip one byte of one of the files to another value; verify must name a problem, without a traceback."""
    originals = {name: (release / name).read_bytes() for name in files}

    @chosen_settings
    @given(st.data())
    def flip(data):
        name = data.draw(st.sampled_from(sorted(files)), label="file")
        original = originals[name]
        offset = data.draw(st.integers(0, len(original) - 1), label="offset")
        changed = bytearray(original)
        changed[offset] ^= data.draw(st.integers(1, 255), label="xor")
        (release / name).write_bytes(bytes(changed))
        try:
            assert verify_release(release), f"a flip of byte {offset} of {name} passed as intact"
        finally:
            (release / name).write_bytes(original)

    flip()
    assert verify_release(release) == []


@pytest.mark.fuzz
def test_byte_flips_anywhere_are_detected(release):
    files = sorted(json.loads((release / "release.json").read_text())["files"]) + ["release.json", "manifest.json"]
    flips(release, files, fuzz_settings(30, 200))


@pytest.mark.fuzz
def test_byte_flips_in_the_manifests_are_detected(release):
    flips(release, ["release.json", "manifest.json"], fuzz_settings(30, 200))


def test_a_flip_through_the_cli_is_one_line(release):
    path = release / "release.json"
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))
    result = verify_cli(release)
    assert result.exit_code == 1 and "Traceback" not in result.output and "error: " in result.output
