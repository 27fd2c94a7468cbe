"""The dataset card (README.md, Hugging Face style) and Croissant metadata (croissant.json) of a release."""

from __future__ import annotations

from contracts.corpus import CorpusMapping
from contracts.tasks import SPLITS
from pipeline.audit.gates import figures

FIELDS = [
    ("id", "Episode id (task id + '.ep')."), ("split", "train, dev or test."), ("family", "Static task family."),
    ("task_id", "The static task the episode was lifted from."), ("site_ids", "Sites the episode touches."),
    ("interaction_mode", "Ordered obligations joined by '+'."), ("obligations", "The obligations as a list."),
    ("initial_message", "The first user turn (withheld slot left out)."), ("hidden_instruction", "The full request, never shown to agents."),
    ("withheld", "Withheld slots with their fixed replies."), ("phases", "Typed phases with prompts, golds, answer forms (fields, units, codes, tolerances) and tool calls."),
    ("follow_ups", "Rationale and evidence questions with golds."), ("commitment_outcome", "answer, abstain or re_clarify."),
    ("evidence_stream_ids", "Streams the answers must cite."), ("turn_budget", "Maximum agent turns."),
    ("difficulty", "Difficulty proxies."), ("provenance_ref", "Key into provenance.jsonl."),
]


def _probe_lines(probe: dict | None) -> list[str]:
    """The artifact probe in words: can the commitment outcome be told from the visible text alone?"""
    if not probe:
        return ["No artifact probe was run."]
    if probe["status"] == "insufficient_rows":
        return [f"Artifact probe: insufficient rows ({probe['rows']} with a commitment; it needs more to decide)."]
    quarter = ", ".join(f"{k} {v}" for k, v in sorted(probe.get("by_quarter", {}).items()))
    return [
        f"Artifact probe (a text-only baseline: the visible conversation up to the commitment and its surface features, "
        f"logistic regression and a shallow tree, {probe['rows']} rows, folds grouped by {probe['grouped_by']}): best "
        f"{probe['model']} {probe['accuracy']} against a majority share of {probe['majority']} (threshold + {probe['margin']}): "
        f"**{probe['status']}**. With folds grouped by calendar quarter (what transfers across time): {quarter}.",
    ]


def _gate_lines(gates: dict) -> list[str]:
    """Every release gate (docs/audit.md): the probe, the shortcut policies, the guessers, the grid rules."""
    if not gates:
        return []
    return ["Release gates (none failed; `insufficient_rows` and `unproven` could not be decided; see docs/audit.md):", "",
            "| gate | rule | figures | status |", "|---|---|---|---|",
            *[f"| {name} | {gate['rule']} | {figures(gate)} | {gate['status']} |"
              for name, gate in gates.items()]]


def dataset_card(mapping: CorpusMapping, manifest: dict) -> str:
    counts = manifest["counts"]
    lines = [
        "---",
        f"pretty_name: telemetry-bench {mapping.name}",
        "license: other",
        f"license_details: \"{mapping.license}\"",
        "task_categories:\n  - question-answering",
        "tags:\n  - agents\n  - tool-use\n  - telemetry\n  - time-series\n  - multi-turn",
        "configs:\n  - config_name: default\n    data_files:\n"
        + "".join(f"      - split: {s}\n        path: {s}.jsonl\n" for s in SPLITS).rstrip(),
        "---",
        "",
        f"# telemetry-bench: {mapping.name}",
        "",
        "## Summary",
        f"Multi-turn, tool-using agent episodes compiled deterministically from real telemetry: {mapping.title}. "
        "Every gold answer was computed by the read-only telemetry tools an agent calls; every episode passed the "
        "contract preflight and was not completed by any construction shortcut policy lacking a capability it claims.",
        "",
        "## Structure",
        "One JSON object per line (canonical JSON: sorted keys, compact), one file per split, plus `provenance.jsonl` "
        "(origin of each episode), `ground_truth/<split>.jsonl` (each episode as a ground-truth trajectory: planning steps, "
        "execution steps, an execution DAG ending in Finish, final_out), `release.json` (hashes and counts) and `croissant.json`.",
        "",
        "| field | meaning |", "|---|---|",
        *[f"| {name} | {meaning} |" for name, meaning in FIELDS],
        "",
        "## Splits",
        "| split | episodes |", "|---|---|",
        *[f"| {s} | {n} |" for s, n in manifest["splits"].items()],
        "",
        f"Held-out sites (test only): {', '.join(mapping.held_out_sites) or 'none'}.",
        "",
        "| family | episodes |", "|---|---|", *[f"| {k} | {v} |" for k, v in counts["family"].items()],
        "",
        "| commitment outcome | episodes |", "|---|---|", *[f"| {k} | {v} |" for k, v in counts["commitment_outcome"].items()],
        "",
        "## Validity checks",
        *_probe_lines(manifest.get("artifact_probe")),
        "",
        *_gate_lines(manifest.get("gates") or {}),
        "",
        "## Provenance",
        f"Raw data: {mapping.citation or mapping.title}. The raw files and their sha256 are listed in `release.json` "
        "(`raw_inputs`); every stage that produced this release is listed by its cache key (`stages`), with the tool "
        "registry version and library versions. Rebuild and compare with `telemetry-bench verify`.",
        "",
        "## License",
        f"Raw data: {mapping.license}. The episodes are derived from it and carry its terms.",
        "",
        "## Limitations",
        "Read-only questions over historical telemetry only: no control actions, no safety-critical decisions. "
        "Labels and point classes come from the source metadata without a domain-expert audit. Quality thresholds are "
        "corpus quantiles, not engineering limits. Windows are UTC calendar windows.",
        "",
    ]
    return "\n".join(lines)


def croissant(mapping: CorpusMapping, manifest: dict) -> dict:
    files = [
        {"@type": "cr:FileObject", "@id": name, "name": name, "contentUrl": name, "encodingFormat": "application/jsonlines",
         "sha256": info["sha256"]}
        for name, info in sorted(manifest["files"].items()) if name in ("train.jsonl", "dev.jsonl", "test.jsonl")
    ]
    return {
        "@context": {"@language": "en", "@vocab": "https://schema.org/", "cr": "http://mlcommons.org/croissant/",
                     "sc": "https://schema.org/", "dct": "http://purl.org/dc/terms/", "data": {"@id": "cr:data", "@type": "@json"},
                     "dataType": {"@id": "cr:dataType", "@type": "@vocab"}, "field": "cr:field", "fileObject": "cr:fileObject",
                     "recordSet": "cr:recordSet", "source": "cr:source", "extract": "cr:extract", "column": "cr:column",
                     "conformsTo": "dct:conformsTo"},
        "@type": "sc:Dataset",
        "conformsTo": "http://mlcommons.org/croissant/1.0",
        "name": f"telemetry-bench-{mapping.name}",
        "description": f"Multi-turn tool-using agent episodes compiled from {mapping.title}.",
        "license": mapping.license,
        "citeAs": mapping.citation or mapping.title,
        "version": manifest["release_version"],
        "distribution": files,
        "recordSet": [{
            "@type": "cr:RecordSet", "@id": "episodes", "name": "episodes",
            "field": [
                {"@type": "cr:Field", "@id": f"episodes/{name}", "name": name, "description": meaning,
                 "dataType": "sc:Text",
                 "source": {"fileObject": {"@id": files[0]["@id"] if files else ""}, "extract": {"column": name}}}
                for name, meaning in FIELDS
            ],
        }],
    }
