"""Load and validate configs/corpora/<name>.toml into a CorpusMapping."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from contracts.answers import AnswersConfig
from contracts.build import BuildConfig
from contracts.corpus import CorpusMapping
from contracts.episodes import AuditConfig, EpisodesConfig
from contracts.tasks import FamiliesConfig
from pipeline.core.errors import ConfigError
from pipeline.core.workspace import Workspace

M = TypeVar("M", bound=BaseModel)


def _format_validation(path: Path, exc: ValidationError) -> str:
    problems = []
    for err in exc.errors():
        where = ".".join(str(part) for part in err["loc"]) or "(top level)"
        problems.append(f"{where}: {err['msg']}")
    return f"{path}: invalid configuration: " + "; ".join(problems)


def load_mapping(path: Path) -> CorpusMapping:
    """Parse and validate one mapping; unknown keys and bad values are errors naming the key."""
    if not path.is_file():
        raise ConfigError(f"{path}: corpus mapping not found; create it or check the corpus name")
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc}); fix the syntax") from exc
    if data.get("name") != path.stem:
        raise ConfigError(f"{path}: name = {data.get('name')!r} must equal the file name {path.stem!r}")
    try:
        return CorpusMapping.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_format_validation(path, exc)) from exc


def corpus_names(ws: Workspace) -> list[str]:
    """Every corpus with a mapping, sorted."""
    return sorted(path.stem for path in ws.corpora_config_dir.glob("*.toml"))


def select_corpora(ws: Workspace, requested: tuple[str, ...] | list[str]) -> list[str]:
    known = corpus_names(ws)
    if not requested:
        return known
    unknown = [name for name in requested if name not in known]
    if unknown:
        raise ConfigError(
            f"unknown corpus {', '.join(unknown)}: known are {', '.join(known) or 'none'} "
            f"(a corpus needs {ws.corpora_config_dir}/<name>.toml)"
        )
    return list(dict.fromkeys(requested))


def _load_model(path: Path, model: type[M], needed_for: str, default: M | None = None) -> M:
    """One configs/*.toml validated into its model; a missing or invalid file is an error naming it."""
    if not path.is_file():
        if default is not None:
            return default
        raise ConfigError(f"{path}: missing; {needed_for}")
    try:
        return model.model_validate(tomllib.loads(path.read_text(encoding="utf-8")))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc}); fix the syntax") from exc
    except ValidationError as exc:
        raise ConfigError(_format_validation(path, exc)) from exc


def load_build_config(ws: Workspace) -> BuildConfig:
    return _load_model(ws.configs_dir / "build.toml", BuildConfig, "", default=BuildConfig())


def load_answers(ws: Workspace) -> AnswersConfig:
    return _load_model(ws.configs_dir / "answers.toml", AnswersConfig, "the answer forms need the field catalogue")


def load_families(ws: Workspace) -> FamiliesConfig:
    """configs/families.toml, its answer fields checked against the catalogue of configs/answers.toml."""
    path = ws.configs_dir / "families.toml"
    families = _load_model(path, FamiliesConfig, "the tasks stage needs the family declarations")
    catalogue = load_answers(ws).fields
    for name, family in families.families.items():
        unknown = [f for f in family.answer_fields if f not in catalogue]
        if unknown:
            raise ConfigError(f"{path}: families.{name}.answer_fields: {', '.join(unknown)} not in configs/answers.toml [fields]; "
                              "declare each field's type there")
        not_numbers = [f for f in family.tolerances if catalogue[f].type != "number"]
        if not_numbers:
            raise ConfigError(f"{path}: families.{name}.tolerances: {', '.join(not_numbers)} are not number fields; "
                              "only numbers have a tolerance")
    return families


def load_episodes_config(ws: Workspace) -> EpisodesConfig:
    """configs/episodes.toml; its commitments must stay within the reach the splits leave (configs/families.toml)."""
    path = ws.configs_dir / "episodes.toml"
    episodes = _load_model(path, EpisodesConfig, "the episodes stage needs the lift declarations")
    reach = load_families(ws).splits.reach_days
    if episodes.commit_within_days + 7 > reach:
        raise ConfigError(f"{path}: commit_within_days = {episodes.commit_within_days} reaches past the splits' reach_days = {reach} "
                          "(a commitment week starts within commit_within_days and lasts 7); raise reach_days in configs/families.toml")
    return episodes


def load_audit_config(ws: Workspace) -> AuditConfig:
    return _load_model(ws.configs_dir / "audit.toml", AuditConfig, "the audit stage needs the shortcut policies")
