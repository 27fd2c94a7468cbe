"""contracts/schemas/: the JSON Schemas of every contract, written from the pydantic models."""

from __future__ import annotations

from pathlib import Path

from pydantic import TypeAdapter

from contracts.agent_io import AgentInput
from contracts.agent_view import AgentObservation
from contracts.answers import AnswerForm, AnswersConfig
from contracts.build import BuildConfig
from contracts.corpus import CorpusMapping
from contracts.episodes import AuditConfig, Episode, EpisodesConfig
from contracts.ingest import IngestReport
from contracts.manifest import StageManifest
from contracts.protocol import Action, Answer, AskUser, CallTool, Plan
from contracts.runtime import EpisodeScore, TraceHeader, TurnRecord
from contracts.tasks import FamiliesConfig, Task
from pipeline.canonical import pretty_json
from pipeline.tools import registry

MODELS = {
    "corpus_mapping": CorpusMapping, "build_config": BuildConfig, "ingest_report": IngestReport,
    "stage_manifest": StageManifest, "families_config": FamiliesConfig, "task": Task,
    "episode": Episode, "episodes_config": EpisodesConfig, "audit_config": AuditConfig,
    "action_ask_user": AskUser, "action_call_tool": CallTool, "action_answer": Answer, "action_plan": Plan,
    "trace_header": TraceHeader, "trace_turn": TurnRecord, "episode_score": EpisodeScore,
    "answers_config": AnswersConfig, "answer_form": AnswerForm, "agent_observation": AgentObservation,
}


def expected_files() -> dict[str, str]:
    """Relative path under contracts/schemas -> file text."""
    files = {f"{name}.schema.json": pretty_json(model.model_json_schema()) for name, model in MODELS.items()}
    files["agent_input.schema.json"] = pretty_json(TypeAdapter(AgentInput).json_schema())  # run --agent-cmd: runner -> agent
    files["agent_output.schema.json"] = pretty_json(TypeAdapter(Action).json_schema())  # agent -> runner: one action
    for tool in registry.TOOLS:
        files[f"tools/{tool.name}.input.schema.json"] = pretty_json(tool.input_schema())
        files[f"tools/{tool.name}.output.schema.json"] = pretty_json(tool.output_schema())
    files["tools/REGISTRY_VERSION"] = registry.registry_version() + "\n"
    return files


def write(folder: Path) -> list[str]:
    written = []
    for rel, text in sorted(expected_files().items()):
        path = folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
            written.append(rel)
    return written


def stale(folder: Path) -> list[str]:
    """Files that are missing or differ from what the models give now."""
    return [rel for rel, text in sorted(expected_files().items())
            if not (folder / rel).is_file() or (folder / rel).read_text(encoding="utf-8") != text]
