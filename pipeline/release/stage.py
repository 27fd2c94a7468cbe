"""The release stage: the audited episodes, provenance, release.json, dataset card, croissant.json."""

from __future__ import annotations

import hashlib
import json
import shutil
from collections import Counter
from pathlib import Path

from contracts.corpus import CorpusMapping
from contracts.episodes import Episode
from contracts.tasks import SPLITS
from pipeline.audit.gates import figures, gate_of
from pipeline.core.canonical import (
    canonical_bytes,
    digest,
    digest_file,
    digest_value,
    iter_rows,
    pretty_json,
    write_json,
    write_jsonl,
)
from pipeline.core.checksums import sha256_file
from pipeline.core.errors import StageError
from pipeline.core.manifest import StageResult, data_identity
from pipeline.release.card import dataset_card
from pipeline.release.ground_truth import trajectory
from pipeline.store.reader import KEYS, OPTIONAL

RELEASE_MANIFEST = "release.json"
CARD = "README.md"  # the dataset card
DERIVED = (CARD, "croissant.json")  # written from release.json's claims, after release_version
MAX_DOCUMENT_BYTES = 64 << 20  # release.json, manifest.json, the card, simulator.json: readers refuse larger ones
DIGEST_PLACEHOLDER = "0" * 64  # the release digest's place in the card while the digest is computed


def file_entry(path: Path) -> dict:
    """Hashes, size and per-row digests of one file (rows: lines of a JSONL file, as its readers split them)."""
    entry = {"sha256": sha256_file(path), "xxh3": digest_file(path), "bytes": path.stat().st_size}
    if path.suffix == ".jsonl":
        with path.open("rb") as handle:
            rows = [digest(row) for row in iter_rows(handle)]
        entry["rows"] = len(rows)
        entry["row_xxh3"] = rows
    return entry


def release_version(files: dict) -> str:
    """A release's short version: the digest of its data files' xxh3 (the card and croissant.json, which state it,
    left out); verify recomputes it from the files."""
    return digest_value([files[n].get("xxh3") for n in sorted(files) if n not in DERIVED])[:16]


def blank_card(card: bytes, release_digest: str) -> bytes:
    """The card with its statement of the release digest blanked: what the digest covers of it."""
    return card.replace(release_digest.encode("ascii"), DIGEST_PLACEHOLDER.encode("ascii"))


def content_digest(manifest: dict, card_sha256: str) -> str:
    """The release digest: sha256 of everything release.json states but its own digests (every file's sha256, rows,
    counts, gates, inputs, versions), with the card as the sha256 of its blanked form (`blank_card`). It names every
    byte of the release but manifest.json (the build's record, which lists release.json's digest and is checked
    against it): `build` prints it, the card states it, `verify --release DIR --expect` checks a folder against it. A
    folder cannot vouch for itself; a digest from where the user trusts can."""
    claims = {k: v for k, v in manifest.items() if k not in ("manifest_xxh3", "release_digest")}
    claims["files"] = {**claims["files"], CARD: {"sha256": card_sha256}}
    return hashlib.sha256(canonical_bytes(claims)).hexdigest()


def _recorded(name: str, audit: dict) -> bool:
    try:
        return bool(gate_of(name, audit))
    except KeyError:  # an audit record with the status alone
        return False


def _gate_summary(name: str, audit: dict) -> dict:
    """One gate as release.json records it: status and the figures it was decided on."""
    gate = gate_of(name, audit)
    keep = (
        "status",
        "rule",
        "rows",
        "accuracy",
        "majority",
        "margin",
        "share",
        "max_share",
        "won",
        "excluded",
        "positive_control",
        "mix",
        "per_split",
        "shares",
        "tolerance",
        "why",
        "allowed_share",
        "unbalanced",
        "min_rows",
        "note",
    )
    return {k: gate[k] for k in keep if k in gate}


STORE_TABLES = "store"  # the tool store's tables as Parquet: a release plays on its own (pipeline/release/playable.py)
SIMULATOR = "simulator.json"  # what the user simulator needs beside the episodes: the phrases that ask for each slot


def build_release(
    mapping: CorpusMapping,
    audit_dir: Path,
    episodes_dir: Path,
    upstream: dict[str, dict],
    out: Path,
    registry_version: str,
    libraries: dict[str, str],
    raw_sha256: dict[str, str],
    store_dir: Path | None = None,
    slot_phrases: dict[str, list[str]] | None = None,
    metadata_sha256: dict[str, str] | None = None,
    *,
    categories: dict[str, str],
    card_license: dict[str, str],
    synthetic: dict | None = None,
) -> StageResult:
    """Copy the audited episodes into the release with their exports; `categories` (family -> ground-truth category,
    configs/families.toml) labels the trajectories; `card_license` (pipeline/release/card.py) heads the dataset card;
    `synthetic` (the generator and seed of generated raw data, pipeline/harness/build.py) is said in release.json and
    the card, so that nobody takes the release for measured data."""
    audit = upstream["audit"]["details"]
    failed = [name for name, status in audit.get("gates", {}).items() if status == "fail"]
    if failed:
        said = "".join(f"; {name}: {figures(gate_of(name, audit))}" for name in failed if _recorded(name, audit))
        raise StageError(
            f"{mapping.name}: the release gates failed ({', '.join(failed)}{said}): see `telemetry-bench audit "
            f"--corpus {mapping.name}` and docs/audit.md; nothing was released"
        )
    controls = audit.get("controls", {})
    if controls.get("preflight_issue_count") or controls.get("oracle_all_released") is False:
        broken = ", ".join(f"{check} {n}" for check, n in sorted(controls.get("preflight_failed_checks", {}).items()))
        raise StageError(
            f"{mapping.name}: the answer contract does not hold on every audited row (preflight issues: "
            f"{controls.get('preflight_issue_count', 0)}{f' ({broken})' if broken else ''}; oracle accomplished "
            f"{controls.get('oracle_accomplished_released')} of {audit.get('released')}): see `telemetry-bench "
            f"preflight --corpus {mapping.name}` and the mapping's labels; nothing was released"
        )
    sizes = upstream["audit"].get("row_counts", {})
    if sizes.get("test") == 0:  # a release is for scoring agents on its test split: an empty one scores nothing
        raise StageError(
            f"{mapping.name}: the test split is empty after the audit (train {sizes.get('train')}, dev "
            f"{sizes.get('dev')}): nothing to score an agent on; give the corpus more data, or more of it to test "
            f"([splits] shares; `telemetry-bench inspect episodes --corpus {mapping.name}` says what was left out); "
            "nothing was released"
        )
    for split in SPLITS:
        shutil.copyfile(audit_dir / f"{split}.jsonl", out / f"{split}.jsonl")
    episodes = [
        Episode.model_validate_json(line)
        for split in SPLITS
        for line in (out / f"{split}.jsonl").read_text(encoding="utf-8").splitlines()
    ]
    released = {e.provenance_ref for e in episodes}
    provenance = [
        line
        for line in (episodes_dir / "provenance.jsonl").read_text(encoding="utf-8").splitlines()
        if line and json.loads(line)["id"] in released
    ]
    (out / "provenance.jsonl").write_text("".join(p + "\n" for p in provenance), encoding="utf-8")
    counts = {
        "family": dict(sorted(Counter(e.family for e in episodes).items())),
        "split": {s: sum(e.split == s for e in episodes) for s in SPLITS},
        "interaction_mode": dict(sorted(Counter(e.interaction_mode for e in episodes).items())),
        "commitment_outcome": dict(sorted(Counter(e.commitment_outcome for e in episodes).items())),
        "family_x_split": {
            f: {s: sum(e.family == f and e.split == s for e in episodes) for s in SPLITS}
            for f in sorted({e.family for e in episodes})
        },
    }
    (out / "ground_truth").mkdir()
    for split in SPLITS:
        rows = [trajectory(e, categories[e.family]) for e in episodes if e.split == split]
        write_jsonl(out / "ground_truth" / f"{split}.jsonl", rows)
    playable = []
    if store_dir is not None:
        (out / STORE_TABLES).mkdir()
        present = [table for table in OPTIONAL if (store_dir / f"{table}.parquet").is_file()]
        for table in sorted([*KEYS, *present]):
            shutil.copyfile(store_dir / f"{table}.parquet", out / STORE_TABLES / f"{table}.parquet")
            playable.append(f"{STORE_TABLES}/{table}.parquet")
    if slot_phrases is not None:
        write_json(
            out / SIMULATOR, {"slots": {slot: sorted(phrases) for slot, phrases in sorted(slot_phrases.items())}}
        )
        playable.append(SIMULATOR)
    files = {
        name: file_entry(out / name)
        for name in [
            *(f"{s}.jsonl" for s in SPLITS),
            "provenance.jsonl",
            *(f"ground_truth/{s}.jsonl" for s in SPLITS),
            *playable,
        ]
    }
    manifest = {
        "corpus": mapping.name,
        "title": mapping.title,
        "license": mapping.license,
        "splits": counts["split"],
        "counts": counts,
        "files": files,
        "thresholds": upstream["store"]["details"].get("thresholds", {}),
        "artifact_probe": audit.get("artifact_probe"),
        "gates": {name: _gate_summary(name, audit) for name in audit.get("gates", {})},
        "raw_inputs": dict(sorted(raw_sha256.items())),
        "metadata_inputs": dict(sorted((metadata_sha256 or {}).items())),  # metadata kept beside the mapping
        "stages": {stage: data_identity(m) for stage, m in sorted(upstream.items())},
        "tool_registry_version": registry_version,
        "libraries": libraries,
        **({"synthetic": synthetic} if synthetic else {}),  # absent for real data: their releases keep their bytes
    }
    manifest["release_version"] = release_version(files)
    # here: mlcroissant (with the pandas and networkx it loads) takes 0.4 s to import, and only a build writes
    # croissant.json, not the commands that read this module's names (run, serve, verify)
    from pipeline.release.croissant import croissant

    (out / "croissant.json").write_text(
        pretty_json(croissant(mapping, manifest, sorted({k for e in episodes for k in e.difficulty}))), encoding="utf-8"
    )
    manifest["files"]["croissant.json"] = file_entry(out / "croissant.json")
    blank = dataset_card(mapping, manifest, card_license, DIGEST_PLACEHOLDER)
    manifest["release_digest"] = content_digest(manifest, hashlib.sha256(blank.encode("utf-8")).hexdigest())
    (out / CARD).write_text(blank.replace(DIGEST_PLACEHOLDER, manifest["release_digest"]), encoding="utf-8")
    manifest["files"][CARD] = file_entry(out / CARD)
    manifest["manifest_xxh3"] = digest_value(manifest)  # of everything above: verify detects an edit of any claim
    write_json(out / RELEASE_MANIFEST, manifest)
    return StageResult(
        outputs=[*manifest["files"], RELEASE_MANIFEST],
        row_counts=counts["split"],
        details={
            "release_version": manifest["release_version"],
            "release_digest": manifest["release_digest"],
            "counts": counts,
        },
    )
