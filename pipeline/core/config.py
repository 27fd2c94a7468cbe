"""Load and validate configs/corpora/<name>.toml into a CorpusMapping."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from contracts.answers import AnswersConfig
from contracts.build import BuildConfig
from contracts.corpus import CorpusMapping
from contracts.episodes import AuditConfig, EpisodesConfig, FamilyLift
from contracts.hub_licenses import HubLicenses
from contracts.ingest import IngestConfig
from contracts.lexicon import PointLexicon
from contracts.local_models import LocalModelsConfig
from contracts.runtime import PriceTable
from contracts.synth import SynthConfig
from contracts.tasks import WINDOW_SLOT, FamiliesConfig, Family
from pipeline.core.errors import ConfigError, UnknownCorpusError, validation_problems
from pipeline.core.toml_text import read_toml
from pipeline.core.workspace import Workspace

M = TypeVar("M", bound=BaseModel)


def _format_validation(path: Path, exc: ValidationError) -> str:
    # say the fix for a missing key: every declaration a family needs is named in its contract
    fix = "required, not declared; add `{name} = ...` there (contracts/ describe each field)"
    return f"{path}: invalid configuration: {validation_problems(exc, missing=fix)}"


def load_mapping(path: Path) -> CorpusMapping:
    """Parse and validate one mapping; unknown keys and bad values are errors naming the key."""
    if not path.is_file():
        raise ConfigError(f"{path}: corpus mapping not found; create it or check the corpus name")
    data = read_toml(path)
    if data.get("name") != path.stem:
        raise ConfigError(f"{path}: name = {data.get('name')!r} must equal the file name {path.stem!r}")
    try:
        return CorpusMapping.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_format_validation(path, exc)) from exc


def corpus_names(ws: Workspace) -> list[str]:
    """Every corpus with a mapping, sorted."""
    return ws.corpus_names()


def select_corpora(ws: Workspace, requested: tuple[str, ...] | list[str]) -> list[str]:
    known = corpus_names(ws)
    if not requested:
        return known
    unknown = [name for name in requested if name not in known]
    if unknown:
        raise UnknownCorpusError(unknown, known, ws.corpora_config_dir)
    return list(dict.fromkeys(requested))


def _load_model(path: Path, model: type[M], needed_for: str, default: M | None = None) -> M:
    """One configs/*.toml validated into its model; a missing or invalid file is an error naming it."""
    if not path.is_file():
        if default is not None:
            return default
        raise ConfigError(f"{path}: missing; {needed_for}")
    return _validated(path, model, path.read_bytes())


@functools.lru_cache(maxsize=256)
def _validated(path: Path, model: type[M], text: bytes) -> M:
    # by content: a build asks for the same few files over a hundred times (configs are frozen models, safe to share)
    data = read_toml(path, text)
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_format_validation(path, exc)) from exc


def load_build_config(ws: Workspace) -> BuildConfig:
    return _load_model(ws.configs_dir / "build.toml", BuildConfig, "", default=BuildConfig())


def load_synth_config(ws: Workspace) -> SynthConfig:
    """configs/synth.toml: the default fault rates of the synthetic generators (measured on the shipped corpora)."""
    return _load_model(ws.configs_dir / "synth.toml", SynthConfig, "`synth` takes its default fault rates from it")


def load_ingest_config(ws: Workspace) -> IngestConfig:
    """configs/ingest.toml: the reject shares above which an ingest stops."""
    return _load_model(ws.configs_dir / "ingest.toml", IngestConfig, "", default=IngestConfig())


def load_answers(ws: Workspace) -> AnswersConfig:
    return _load_model(ws.configs_dir / "answers.toml", AnswersConfig, "the answer forms need the field catalogue")


def load_lexicon(ws: Workspace) -> PointLexicon:
    """configs/lexicon.toml: the point classes and units `corpus draft` proposes from the words of stream names."""
    return _load_model(
        ws.configs_dir / "lexicon.toml", PointLexicon, "`corpus draft` proposes point classes from it (docs/ingest.md)"
    )


def load_hub_licenses(ws: Workspace) -> HubLicenses:
    """configs/hub_licenses.toml: the license ids the Hugging Face Hub lists, for the dataset card's `license:`."""
    return _load_model(
        ws.configs_dir / "hub_licenses.toml", HubLicenses, "the dataset card names its license by the Hub's ids"
    )


def load_price_table(path: Path) -> dict[str, dict[str, float]]:
    """A `score --prices` table: model -> {input, output} US dollars per million tokens."""
    table = _load_model(path, PriceTable, 'give a TOML file of [models."<model>"] input and output prices')
    return {model: price.model_dump() for model, price in table.models.items()}


def load_local_models(ws: Workspace) -> LocalModelsConfig:
    """configs/local_models.toml: the local GGUF models `make model-smoke` plays and its slice."""
    return _load_model(ws.configs_dir / "local_models.toml", LocalModelsConfig, "make model-smoke reads it")


def load_families(ws: Workspace) -> FamiliesConfig:
    """configs/families.toml, its answer fields checked against the catalogue of configs/answers.toml."""
    path = ws.configs_dir / "families.toml"
    families = _load_model(path, FamiliesConfig, "the tasks stage needs the family declarations")
    catalogue = load_answers(ws).fields
    for name, family in families.families.items():
        unknown = [f for f in family.answer_fields if f not in catalogue]
        if unknown:
            raise ConfigError(
                f"{path}: families.{name}.answer_fields: {', '.join(unknown)} not in configs/answers.toml [fields]; "
                "declare each field's type there"
            )
        not_numbers = [f for f in family.tolerances if catalogue[f].type != "number"]
        if not_numbers:
            raise ConfigError(
                f"{path}: families.{name}.tolerances: {', '.join(not_numbers)} are not number fields; "
                "only numbers have a tolerance"
            )
    return families


def _lift_problems(lift: FamilyLift, family: Family) -> list[tuple[str, str]]:
    """(field, what is wrong and how to fix it) for a family's lift that its declaration in configs/families.toml
    cannot carry: each lift step reads slots, golds or calls that only some families have."""
    problems = []
    windowed = ", ".join(WINDOW_SLOT)
    if lift.withhold == "time" and family.period not in WINDOW_SLOT and family.period != "instant":
        problems.append(
            (
                "withhold",
                f"'time' but the family's period is {family.period!r}: withhold the time only of a "
                f"family with a window ({windowed}) or an instant",
            )
        )
    if lift.revision == "revise_window" and family.period not in WINDOW_SLOT:
        problems.append(("revision", f"'revise_window' needs a windowed period ({windowed}), not {family.period!r}"))
    if lift.revision == "revise_target" and family.target_shape != "single":
        problems.append(
            (
                "revision",
                f"'revise_target' moves to another single stream; the family's target_shape is {family.target_shape!r}",
            )
        )
    if lift.revision == "probe_nearest" and "observed_timestamp" not in family.canonical.gold:
        problems.append(
            (
                "revision",
                "'probe_nearest' probes near the reading the gold found: declare an observed_timestamp gold field",
            )
        )
    if lift.prefer and (family.target_shape != "pair" or family.period not in ("day", "week", "month")):
        problems.append(
            (
                "prefer",
                "true compares the two windows of a pair: it needs target_shape = 'pair' and a day, week or "
                f"month period (the family has {family.target_shape!r}, {family.period!r})",
            )
        )
    if (
        lift.commit_target == "timestamp"
        and family.period != "instant"
        and "observed_timestamp" not in family.canonical.gold
    ):
        problems.append(
            (
                "commit_target",
                "'timestamp' commits near the reading asked about: the family needs period 'instant' "
                "or an observed_timestamp gold field; use 'window'",
            )
        )
    if lift.phase == "quality_decision" and family.canonical.calls[-1].tool != "inspect_quality_window":
        problems.append(
            ("phase", "'quality_decision' asks for the band of the last canonical call: make it inspect_quality_window")
        )
    return problems


def load_episodes_config(ws: Workspace) -> EpisodesConfig:
    """configs/episodes.toml: one lift per family of configs/families.toml that the family's declaration can carry, and
    commitments within the reach the splits leave."""
    path = ws.configs_dir / "episodes.toml"
    episodes = _load_model(path, EpisodesConfig, "the episodes stage needs the lift declarations")
    families = load_families(ws)
    missing = sorted(set(families.families) - set(episodes.families))
    if missing:
        raise ConfigError(
            f"{path}: families.{missing[0]}: no lift declared for this family of configs/families.toml; "
            f"add [families.{missing[0]}] (phase, withhold, initial, revision, commit_target, follow_ups)"
        )
    unknown = sorted(set(episodes.families) - set(families.families))
    if unknown:
        raise ConfigError(
            f"{path}: families.{unknown[0]}: not a family of configs/families.toml; declare it there or remove this "
            f"lift"
        )
    for name, lift in sorted(episodes.families.items()):
        for field, problem in _lift_problems(lift, families.families[name]):
            raise ConfigError(f"{path}: families.{name}.{field}: {problem}")
    reach = families.splits.reach_days
    if episodes.commit_within_days + 7 > reach:
        raise ConfigError(
            f"{path}: commit_within_days = {episodes.commit_within_days} reaches past the splits' reach_days = {reach} "
            "(a commitment week starts within commit_within_days and lasts 7); raise reach_days in "
            "configs/families.toml"
        )
    return episodes


def load_audit_config(ws: Workspace) -> AuditConfig:
    return _load_model(ws.configs_dir / "audit.toml", AuditConfig, "the audit stage needs the shortcut policies")


def weekly_commitments(ws: Workspace) -> frozenset[str]:
    """The families whose commitment asks about a calendar week (configs/episodes.toml commit_target = "window"): the
    tasks stage keeps them only on a corpus with whole weeks (pipeline/tasks/fit.py)."""
    lifts = load_episodes_config(ws)
    return frozenset(name for name, lift in lifts.families.items() if lift.commit_target == "window")
