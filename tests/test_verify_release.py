"""verify --release trusts nothing of release.json it can recompute, and release.json's own digest covers the rest:
every tampering of issue 25 item 7 is one named problem (or one error line), never a traceback or a pass."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from pipeline.cli import main
from pipeline.core.canonical import digest_value, pretty_json
from pipeline.release.verify import verify_release
from tests.helpers import SMALLEST, fuzz_settings, poison_release, rehash_release, verify_cli

RELEASE_CORPUS = SMALLEST  # each case verifies a whole release (its store loaded too): the smallest release


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
    assert len(output.strip().splitlines()) == 1  # one problem: the error line says it, once


def test_a_renamed_key_or_a_wrong_type_is_one_line(release):
    edit(release, lambda m: m.update(file=m.pop("files")))
    one_line_error(release, "release.json: no files (dict) key")
    edit(release, lambda m: m.update(files=["train.jsonl"], counts=None))
    one_line_error(release, "release.json: no files (dict), counts (dict) key")


def test_a_release_built_before_the_release_digest_is_one_line_saying_so(release):
    """Releases built before release.json carried release_digest: one line saying what it means and the fix."""
    edit(release, lambda m: m.pop("release_digest"), redigest=True)
    result = verify_cli(release)
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit), result.output
    (line,) = result.output.strip().splitlines()
    assert line.startswith("error: ") and "release.json: no release_digest: this release was built before" in line
    assert "rebuild it with `telemetry-bench build`, or download the release again" in line


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
    (release / ".cache" / "huggingface" / "download").mkdir(parents=True)
    (release / ".cache" / "huggingface" / "download" / "release.json.lock").write_text("")
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


def test_a_release_rewritten_whole_is_caught_by_its_versions(release):
    poison_release(release)
    problems = verify_release(release)
    assert any("release_version" in p and "is not the digest of the files" in p for p in problems), problems
    assert any("release_digest is not the digest of the content" in p for p in problems), problems


def test_a_release_rewritten_with_its_versions_is_told_by_the_digest_the_user_trusts(release):
    card = (release / "README.md").read_text()
    trusted = json.loads((release / "release.json").read_text())["release_digest"]
    assert f"`telemetry-bench verify --release DIR --expect sha256:{trusted}`" in card
    result = CliRunner().invoke(main, ["verify", "--release", str(release), "--expect", f"sha256:{trusted}"])
    assert result.exit_code == 0 and f"release digest sha256:{trusted} (the digest you expect)" in result.output
    poison_release(release)
    rehash_release(release, versions=True)  # the forger restates release_version, the digest and the card
    assert verify_release(release) == []  # a folder cannot vouch for itself
    output = one_line_error_of(["verify", "--release", str(release), "--expect", trusted], "not the release you trust")
    assert f"not the sha256:{trusted} you expect" in output


def one_line_error_of(args, *expected):
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit), result.output
    assert result.output.strip().splitlines()[-1].startswith("error: ") and "Traceback" not in result.output
    assert all(e in result.output for e in expected), result.output
    return result.output


def test_an_expected_digest_that_is_not_one_is_one_line(release):
    output = one_line_error_of(["verify", "--release", str(release), "--expect", "abc"], "not a release digest")
    assert len(output.strip().splitlines()) == 1


def test_the_digest_build_prints_is_the_one_the_release_has(real_artifacts):
    """`build` prints each corpus's release digest on its summary line (all stages cached here: nothing is written)."""
    from tests.helpers import run_cli

    result = run_cli(real_artifacts, "build", "--corpus", "xai4heat")
    assert result.exit_code == 0, result.output
    (line,) = [line for line in result.output.splitlines() if line.startswith("  xai4heat     released")]
    digest = line.rsplit("digest sha256:", 1)[1]
    release = real_artifacts / "xai4heat" / "release"
    assert digest == json.loads((release / "release.json").read_text())["release_digest"]
    assert verify_release(release, f"sha256:{digest}") == []


def test_ground_truth_is_checked_against_the_split_rows(release):
    path = release / "ground_truth" / "test.jsonl"
    rows = path.read_text().splitlines(keepends=True)
    row = json.loads(rows[0])
    row["final_out"]["phases"][0] = {key: "edited" for key in row["final_out"]["phases"][0]}
    rows[0] = json.dumps(row, sort_keys=True, separators=(",", ":"), ensure_ascii=False) + "\n"
    path.write_text("".join(rows))
    rehash_release(release, versions=True)
    problems = verify_release(release)
    assert any(
        "ground_truth/test.jsonl: row 1 (episode " in p
        and "not the ground truth of its episode" in p
        and "final_out" in p
        for p in problems
    ), problems
    assert len(problems) == 1, problems


def test_a_category_is_one_per_family(release):
    path = release / "ground_truth" / "train.jsonl"
    rows = path.read_text().splitlines(keepends=True)
    row = json.loads(rows[0])
    row["category"] = "another category"
    rows[0] = json.dumps(row, sort_keys=True, separators=(",", ":"), ensure_ascii=False) + "\n"
    path.write_text("".join(rows))
    rehash_release(release, versions=True)
    problems = verify_release(release)
    assert any(f"family {row['family']} has the categories" in p for p in problems), problems


def test_only_the_files_a_hub_adds_are_accepted_by_name(release):
    hub = release / ".cache" / "huggingface"
    for name in (".gitignore", "CACHEDIR.TAG", "download/test.jsonl.metadata", "download/store/sites.parquet.lock"):
        (hub / name).parent.mkdir(parents=True, exist_ok=True)
        (hub / name).write_text("")
    (release / ".gitattributes").write_text("*.parquet filter=lfs\n")
    assert verify_release(release) == []
    for name in (
        ".gitattributes_evil",
        ".gitattributes.py",
        ".cache/huggingface/evil.py",
        ".cache/huggingface/download/x",
    ):
        (release / name).parent.mkdir(parents=True, exist_ok=True)
        (release / name).write_text("")
        one_line_error(release, f"{name}: not part of the release")
        (release / name).unlink()


MEASURE = """
import resource, subprocess, sys
done = subprocess.run(sys.argv[1:], capture_output=True, text=True, check=False)
sys.stderr.write(done.stderr)
print(done.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
sys.stdout.write(done.stdout)
"""


def test_verify_reads_a_2gib_file_within_500mb(release):
    """A test.jsonl of 2 GiB (sparse: zeros, no newline) is hashed in chunks and read a bounded row at a time: the
    verify process peaks far below what holding the file would take (6.8 GB before, 181 MB measured after). Its peak is
    measured by a process of its own whose only child it is (RUSAGE_CHILDREN)."""
    import subprocess
    import sys

    with (release / "test.jsonl").open("r+b") as handle:
        handle.truncate(2 << 30)
    command = [sys.executable, "-m", "pipeline.cli", "verify", "--release", str(release)]
    done = subprocess.run(
        [sys.executable, "-c", MEASURE, *command], capture_output=True, text=True, timeout=900, check=False
    )
    status, peak_kb = (int(x) for x in done.stdout.splitlines()[0].split())
    assert status == 1 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert "test.jsonl: row " in done.stdout and "is longer than" in done.stdout, done.stdout
    assert peak_kb < 500 * 1024, f"verify --release peaked at {peak_kb // 1024} MB"


@pytest.mark.parametrize(
    "name", ["README.md", "test.jsonl", "croissant.json", "simulator.json", "store/sites.parquet", "provenance.jsonl"]
)
def test_one_changed_byte_is_blamed_on_its_file_alone_with_or_without_expect(release, name):
    # issue 54: a byte of the card was also blamed on release.json ("release_digest is not the digest of the
    # content"), and the --expect line came for the card and not for the other files
    trusted = json.loads((release / "release.json").read_text())["release_digest"]
    path = release / name
    data = bytearray(path.read_bytes())
    at = len(data) // 2
    data[at] = data[at] + 1 if chr(data[at]).isalnum() and chr(data[at] + 1).isalnum() else data[at] ^ 1
    path.write_bytes(bytes(data))
    for expect in (None, f"sha256:{trusted}"):
        problems = verify_release(release, expect)
        assert problems and all(p.startswith(f"{path}: ") for p in problems), problems


@pytest.mark.parametrize("split", ["train", "dev", "test"])
def test_a_row_broken_by_one_byte_is_blamed_on_its_split_file_alone(release, split):
    """A byte that makes a row no longer JSON is that split file's problem: the counts recomputed from the rows left
    are not compared with release.json's, which would blame release.json for the split file's change."""
    path = release / f"{split}.jsonl"
    data = path.read_bytes()
    path.write_bytes(data.replace(b'":', b'";', 1))
    problems = verify_release(release)
    assert any(p.startswith(f"{path}: row 1: not a valid episode") for p in problems), problems
    assert all(p.startswith(f"{path}: ") for p in problems), problems
