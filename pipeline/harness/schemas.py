"""contracts/schemas/: the JSON Schemas of every contract, written from the pydantic models."""

from __future__ import annotations

import json
import types
from pathlib import Path
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel, TypeAdapter

from contracts.agent_io import AgentInput
from contracts.agent_view import AgentObservation
from contracts.answers import AnswerForm, AnswersConfig
from contracts.build import BuildConfig
from contracts.corpus import CorpusMapping
from contracts.episodes import AuditConfig, Episode, EpisodesConfig
from contracts.ground_truth import Trajectory
from contracts.hub_licenses import HubLicenses
from contracts.ingest import IngestConfig, IngestReport
from contracts.leaderboard import Leaderboard
from contracts.lexicon import PointLexicon
from contracts.manifest import StageManifest
from contracts.protocol import Action, Answer, AskUser, CallTool, Plan
from contracts.runtime import EpisodeScore, TraceHeader, TurnRecord
from contracts.tasks import FamiliesConfig, Task
from pipeline.core.canonical import pretty_json
from pipeline.harness.tool_docs import TOOLS_BEGIN, TOOLS_DOC, TOOLS_END, tools_reference
from pipeline.tools import registry

MODELS = {
    "corpus_mapping": CorpusMapping,
    "build_config": BuildConfig,
    "ingest_report": IngestReport,
    "stage_manifest": StageManifest,
    "families_config": FamiliesConfig,
    "task": Task,
    "episode": Episode,
    "episodes_config": EpisodesConfig,
    "audit_config": AuditConfig,
    "action_ask_user": AskUser,
    "action_call_tool": CallTool,
    "action_answer": Answer,
    "action_plan": Plan,
    "trace_header": TraceHeader,
    "trace_turn": TurnRecord,
    "episode_score": EpisodeScore,
    "leaderboard": Leaderboard,
    "answers_config": AnswersConfig,
    "answer_form": AnswerForm,
    "agent_observation": AgentObservation,
    "point_lexicon": PointLexicon,
    "hub_licenses": HubLicenses,
    "ingest_config": IngestConfig,
    "ground_truth_trajectory": Trajectory,  # the seed's format; gt_validate reads this file at run time
}


def expected_files() -> dict[str, str]:
    """Relative path under contracts/schemas -> file text."""
    files = {f"{name}.schema.json": pretty_json(model.model_json_schema()) for name, model in MODELS.items()}
    files["agent_input.schema.json"] = pretty_json(
        TypeAdapter(AgentInput).json_schema()
    )  # run --agent-cmd: runner -> agent
    files["agent_output.schema.json"] = pretty_json(TypeAdapter(Action).json_schema())  # agent -> runner: one action
    for tool in registry.TOOLS:
        files[f"tools/{tool.name}.input.schema.json"] = pretty_json(tool.input_schema())
        files[f"tools/{tool.name}.output.schema.json"] = pretty_json(tool.output_schema())
    files["tools/REGISTRY_VERSION"] = registry.registry_version() + "\n"
    return files


def _generated(folder: Path) -> dict[Path, str]:
    """Every generated file (the schemas under `folder`, the generated blocks of docs/ beside it) -> its text."""
    files = {folder / rel: text for rel, text in sorted(expected_files().items())}
    for name in GENERATED_DOCS:
        doc = folder.parents[1] / name
        if doc.is_file():
            files[doc] = doc_with_reference(doc.read_text(encoding="utf-8"), name)
    return files


def write(folder: Path) -> list[str]:
    written = []
    for path, text in _generated(folder).items():
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
            written.append(path.name if path.parent.name == "docs" else path.relative_to(folder).as_posix())
    return written


def stale(folder: Path) -> list[str]:
    """Files that are missing or differ from what the models give now."""
    return [
        path.name if path.parent.name == "docs" else path.relative_to(folder).as_posix()
        for path, text in _generated(folder).items()
        if not path.is_file() or path.read_text(encoding="utf-8") != text
    ]


INGEST_DOC = "docs/ingest.md"
REFERENCE_BEGIN = (
    "<!-- mapping-keys:begin (generated from contracts/corpus.py by `telemetry-bench schemas`; do not edit) -->"
)
REFERENCE_END = "<!-- mapping-keys:end -->"


def _type_name(annotation: Any) -> str:
    """A key's type as a mapping author reads it: text, integer, "a" | "b", list of text, table of ..."""
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is Annotated:
        return _type_name(args[0])
    if origin is Literal:
        return " \\| ".join(json.dumps(a) for a in args)
    if origin in (Union, types.UnionType):
        names = [_type_name(a) for a in args if a is not type(None)]
        return " \\| ".join(names) + (" (optional)" if type(None) in args else "")
    if origin is list:
        return f"list of {_type_name(args[0])}"
    if origin is tuple:
        return "[" + ", ".join(_type_name(a) for a in args) + "]"
    if origin is dict:
        return f"table of {_type_name(args[0])} -> {_type_name(args[1])}"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return f"table ({annotation.__name__})"
    return {str: "text", int: "integer", float: "number", bool: "true \\| false"}.get(annotation, str(annotation))


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The models a key's value may be (members of a union, items of a list or table)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in get_args(annotation) for m in _models_in(arg)]


def mapping_models() -> list[tuple[str, type[BaseModel]]]:
    """Every model of the corpus mapping contract with the TOML table it is written in, in reading order."""
    found, queue = [], [("top level", CorpusMapping)]
    while queue:
        where, model = queue.pop(0)
        if any(m is model for _, m in found):
            continue
        found.append((where, model))
        for key, info in model.model_fields.items():
            for sub in _models_in(info.annotation):
                table = {"PointSpec": "[metadata.points.<key>]", "CounterRule": "[metadata.points.<key>.counter]"}.get(
                    sub.__name__, f"[{key}]" if where == "top level" else f"{where[:-1]}.{key}]"
                )
                queue.append((table, sub))
    return found


def undocumented_keys() -> list[str]:
    """Keys of the mapping contract without a description (a test keeps this empty)."""
    return [
        f"{model.__name__}.{key}"
        for _, model in mapping_models()
        for key, info in model.model_fields.items()
        if not (info.description or "").strip()
    ]


def mapping_reference() -> str:
    """The key reference of docs/ingest.md: one table per mapping table, every key with its type, default and
    meaning."""
    lines = [REFERENCE_BEGIN, ""]
    for where, model in mapping_models():
        kind = model.model_fields.get("kind")
        title = f"{where}, kind = {_type_name(kind.annotation)}" if kind is not None else where
        lines += [
            f"#### {title}: {model.__name__}",
            "",
            (model.__doc__ or "").strip().splitlines()[0],
            "",
            "| key | type | default | meaning |",
            "|---|---|---|---|",
        ]
        for key, info in model.model_fields.items():
            value = None if info.is_required() else info.get_default(call_default_factory=True)
            default = (
                "required"
                if info.is_required()
                else "see below"
                if isinstance(value, BaseModel)
                else f"`{json.dumps(value)}`"
            )
            meaning = (info.description or "").replace("|", "\\|").replace("\n", " ")
            lines.append(f"| `{key}` | {_type_name(info.annotation)} | {default} | {meaning} |")
        lines.append("")
    return "\n".join([*lines, REFERENCE_END])


# Each doc with a generated block: its markers and the function that writes the block (markers included).
GENERATED_DOCS = {
    INGEST_DOC: (REFERENCE_BEGIN, REFERENCE_END, mapping_reference),
    TOOLS_DOC: (TOOLS_BEGIN, TOOLS_END, tools_reference),
}


def doc_with_reference(text: str, doc: str = INGEST_DOC) -> str:
    """A doc of GENERATED_DOCS with its generated block replaced (between the markers)."""
    begin, end, generate = GENERATED_DOCS[doc]
    if begin not in text or end not in text:
        raise ValueError(f"{doc}: the markers of the generated block are missing; restore {begin} ... {end}")
    head, rest = text.split(begin, 1)
    return head + generate() + rest.split(end, 1)[1]
