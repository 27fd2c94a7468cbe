"""The dataset card of a release (README.md): its YAML header made with huggingface_hub, its body from the manifest."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from contracts.corpus import CorpusMapping
from contracts.episodes import Episode
from contracts.hub_licenses import HubLicenses
from contracts.tasks import SPLITS
from pipeline.audit.gates import figures
from pipeline.core.errors import ConfigError, shown
from pipeline.store.expected import completed, says

if TYPE_CHECKING:
    from huggingface_hub import DatasetCardData

SIZE_CATEGORIES = (
    (1_000, "n<1K"),
    (10_000, "1K<n<10K"),
    (100_000, "10K<n<100K"),
    (1_000_000, "100K<n<1M"),
    (10_000_000, "1M<n<10M"),
    (100_000_000, "10M<n<100M"),
)
CONFIGS = {
    "episodes": "{split}.jsonl",
    "ground_truth": "ground_truth/{split}.jsonl",
}  # the card's configs, first the default


def size_category(rows: int) -> str:
    """The Hugging Face size category of a dataset with this many rows."""
    return next((name for bound, name in SIZE_CATEGORIES if rows < bound), "n>100M")


def license_id(mapping: CorpusMapping, licenses: HubLicenses) -> str:
    """The SPDX identifier of the raw data's license: license_id when the mapping sets it, else the identifier its
    `license` names (alone, or as its first word: "MIT (repository ...)"); "" for a mapping that writes no license.
    A license written in other words is one ConfigError line listing the accepted forms: the card would otherwise drop
    it for `license: other` without a word."""
    if mapping.license_id:
        return mapping.license_id
    first = re.split(r"[\s(;,]", mapping.license.strip(), maxsplit=1)[0]
    named = licenses.spdx_id(mapping.license) or licenses.spdx_id(first)
    if named:
        return named
    if "license" not in mapping.model_fields_set:
        return ""
    raise ConfigError(
        f"corpus {mapping.name}: license = {shown(mapping.license)} names no license we know; write an SPDX "
        f'identifier ({", ".join(licenses.spdx)}), alone or first ("MIT (where it is stated)"), or set license_id '
        "to another SPDX identifier with license_url (configs/hub_licenses.toml)"
    )


def card_license(mapping: CorpusMapping, licenses: HubLicenses) -> dict[str, str]:
    """The card's license keys for the raw data's license (the episodes are derived data and carry its terms): the
    Hub's id when the Hub lists it (configs/hub_licenses.toml), else `other` with a license_name and license_link,
    which the Hub reserves for licenses not on its list."""
    spdx = license_id(mapping, licenses)
    hub = licenses.spdx.get(licenses.spdx_id(spdx) or "", spdx.lower())
    if hub in licenses.ids:
        return {"license": hub}
    return {
        "license": "other",
        "license_name": spdx.lower() or f"{mapping.name}-data-license",
        "license_link": mapping.license_url or "README.md",
    }


def card_data(mapping: CorpusMapping, manifest: dict, license: dict[str, str]) -> DatasetCardData:
    """The card's YAML header, in the keys the Hugging Face Hub reads: the license keys of `card_license`, one config
    per file kind with a file per split."""
    configs = [
        {
            "config_name": name,
            **({"default": True} if i == 0 else {}),
            "data_files": [{"split": s, "path": pattern.format(split=s)} for s in SPLITS],
        }
        for i, (name, pattern) in enumerate(CONFIGS.items())
    ]
    from huggingface_hub import DatasetCardData  # here: a build checks a license long before it writes a card

    return DatasetCardData(
        pretty_name=f"telemetry-bench {mapping.name}",
        language=["en"],
        **license,
        size_categories=[size_category(sum(manifest["splits"].values()))],
        task_categories=["question-answering"],
        tags=[
            "agents",
            "tool-use",
            "telemetry",
            "time-series",
            "multi-turn",
            *(["synthetic"] * ("synthetic" in manifest)),
        ],
        configs=configs,
    )


def field_meanings() -> list[tuple[str, str]]:
    """Every field of an episode line and what it means: from the episode contract, the one home of both."""
    return [(name, info.description or "") for name, info in Episode.model_fields.items()]


def _probe_lines(probe: dict | None) -> list[str]:
    """The artifact probe in words: can the commitment outcome be told from the visible text alone?"""
    if not probe:
        return ["No artifact probe was run."]
    if probe["status"] == "insufficient_rows":
        return [f"Artifact probe: insufficient rows ({probe['rows']} with a commitment; it needs more to decide)."]
    quarter = ", ".join(f"{k} {v}" for k, v in sorted(probe.get("by_quarter", {}).items()))
    return [
        f"Artifact probe (a text-only baseline: the visible conversation up to the commitment and its surface "
        f"features, "
        f"logistic regression and a shallow tree, {probe['rows']} rows, folds grouped by {probe['grouped_by']}): best "
        f"{probe['model']} {probe['accuracy']} against a majority share of {probe['majority']} (threshold + "
        f"{probe['margin']}): "
        f"**{probe['status']}**. With folds grouped by calendar quarter (what transfers across time): {quarter}.",
    ]


def _gate_lines(gates: dict) -> list[str]:
    """Every release gate (docs/audit.md): the probe, the shortcut policies, the guessers, the grid rules."""
    if not gates:
        return []
    return [
        "Release gates (none failed; `insufficient_rows` and `unproven` could not be decided; see docs/audit.md):",
        "",
        "| gate | rule | figures | status |",
        "|---|---|---|---|",
        *[f"| {name} | {gate['rule']} | {figures(gate)} | {gate['status']} |" for name, gate in gates.items()],
    ]


def _silence_lines(mapping: CorpusMapping) -> list[str]:
    """The streams the mapping declares absent by design, with when they are expected and why (none: no section)."""
    if not mapping.silence:
        return []
    rules = [completed(rule, mapping.time.timezone) for rule in mapping.silence]
    return [
        "## Streams absent by design",
        "These streams are silent by design outside their expected hours: their coverage, gaps and the quality "
        "thresholds count the expected hours only, and the tools say when an instant lies outside them.",
        "",
        "| streams (regex) | expected hours; why silent otherwise |",
        "|---|---|",
        *[f"| `{rule.streams}` | {says(rule)} |" for rule in rules],
        "",
    ]


def dataset_card(mapping: CorpusMapping, manifest: dict, license: dict[str, str], release_digest: str) -> str:
    """The card; `release_digest` is the release's (pipeline.release.stage.content_digest), stated where a user who
    trusts this page can copy it to check a download."""
    counts = manifest["counts"]
    origin = manifest.get("synthetic")
    source = (
        f"SYNTHETIC telemetry in the format of {mapping.title}, generated by `{origin['generator']}` (seed "
        f"{origin['seed']}): not measured data; do not report results on it as results on the real corpus"
        if origin
        else f"real telemetry: {mapping.title}"
    )
    lines = [
        f"# telemetry-bench: {mapping.name}" + (" (synthetic)" if origin else ""),
        "",
        "## Summary",
        f"Multi-turn, tool-using agent episodes compiled deterministically from {source}. "
        "Every gold answer was computed by the read-only telemetry tools an agent calls; every episode passed the "
        "contract preflight and was not completed by any construction shortcut policy lacking a capability it claims.",
        "",
        "## Structure",
        "One JSON object per line (canonical JSON: sorted keys, compact), one file per split, plus `provenance.jsonl` "
        "(origin of each episode), `ground_truth/<split>.jsonl` (each episode as a ground-truth trajectory: planning "
        "steps, "
        "execution steps, an execution DAG ending in Finish, final_out), `store/*.parquet` (the tool store's tables) "
        "and "
        "`simulator.json` (the user simulator's phrases), with which `telemetry-bench run --release <this folder>` "
        "plays "
        "the episodes, `release.json` (hashes and counts) and `croissant.json` (Croissant metadata, one record set per "
        "split).",
        "",
        "| field | meaning |",
        "|---|---|",
        *[f"| {name} | {meaning} |" for name, meaning in field_meanings()],
        "",
        "## Splits",
        "| split | episodes |",
        "|---|---|",
        *[f"| {s} | {n} |" for s, n in manifest["splits"].items()],
        "",
        f"Held-out sites (test only): {', '.join(mapping.held_out_sites) or 'none'}.",
        "",
        "| family | episodes |",
        "|---|---|",
        *[f"| {k} | {v} |" for k, v in counts["family"].items()],
        "",
        "| commitment outcome | episodes |",
        "|---|---|",
        *[f"| {k} | {v} |" for k, v in counts["commitment_outcome"].items()],
        "",
        *_silence_lines(mapping),
        "## Validity checks",
        *_probe_lines(manifest.get("artifact_probe")),
        "",
        *_gate_lines(manifest.get("gates") or {}),
        "",
        "## Provenance",
        f"Raw data: {mapping.citation or mapping.title}. The raw files and their sha256 are listed in `release.json` "
        "(`raw_inputs`); every stage that produced this release is listed by its configuration hash and the digest of "
        "its outputs (`stages`), with the tool registry version and library versions. Rebuild and compare with "
        "`telemetry-bench verify`.",
        "",
        "## Integrity",
        f"Release digest: `sha256:{release_digest}` (of every file of this release but manifest.json, with this digest "
        "blanked in this card). "
        "A folder cannot vouch for itself: check a copy against the digest from a source you trust (this card on the "
        f"publisher's page, or the build's output) with `telemetry-bench verify --release DIR --expect "
        f"sha256:{release_digest}`.",
        "",
        "## License",
        f"Raw data: {mapping.license}"
        + (f" ({mapping.license_url})" if mapping.license_url else "")
        + ". The episodes are derived from it and carry its terms.",
        "",
        "## Limitations",
        "Read-only questions over historical telemetry only: no control actions, no safety-critical decisions. "
        "Labels and point classes come from the source metadata without a domain-expert audit. Quality thresholds are "
        "corpus quantiles, not engineering limits. Windows are UTC calendar windows.",
        "",
    ]
    from huggingface_hub import DatasetCard

    card = DatasetCard(f"---\n{card_data(mapping, manifest, license).to_yaml()}\n---\n\n" + "\n".join(lines))
    return str(card)
