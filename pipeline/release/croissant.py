"""The release's Croissant metadata (croissant.json), built with mlcroissant: one record set per split, typed from the
episode contract, every released file in the distribution with its sha256, no build date."""

from __future__ import annotations

import logging
import types
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import mlcroissant as mlc
from pydantic import BaseModel

from contracts.corpus import CorpusMapping
from contracts.episodes import Episode
from contracts.tasks import SPLITS
from pipeline import __version__
from pipeline.core.errors import StageError

SCALARS = {str: mlc.DataType.TEXT, int: mlc.DataType.INTEGER, float: mlc.DataType.FLOAT, bool: mlc.DataType.BOOL}
FORMATS = {
    ".jsonl": mlc.EncodingFormat.JSON_LINES,
    ".json": mlc.EncodingFormat.JSON,
    ".parquet": mlc.EncodingFormat.PARQUET,
}
EPISODE_LINES = "{split}.jsonl"  # the file each split's record set reads


def _scalar(annotation: Any) -> tuple[Any, bool] | None:
    """(Croissant data type, repeated) of a scalar or a list of scalars; None for anything nested."""
    origin = get_origin(annotation)
    if origin is Annotated:
        return _scalar(get_args(annotation)[0])
    if origin is Literal:
        kinds = {type(arg) for arg in get_args(annotation)}
        return (SCALARS[kinds.pop()], False) if len(kinds) == 1 and next(iter(kinds), None) in SCALARS else None
    if annotation in SCALARS:
        return SCALARS[annotation], False
    if origin is list:
        inner = _scalar(get_args(annotation)[0])
        return (inner[0], True) if inner and not inner[1] else None
    return None


def _models(annotation: Any) -> list[type[BaseModel]]:
    """The models a list of objects may hold (every member of a discriminated union), or [] if it is not one."""
    if get_origin(annotation) is not list:
        return []
    inner = get_args(annotation)[0]
    if get_origin(inner) is Annotated:
        inner = get_args(inner)[0]
    members = get_args(inner) if get_origin(inner) in (Union, types.UnionType) else (inner,)
    return list(members) if all(isinstance(m, type) and issubclass(m, BaseModel) for m in members) else []


class _Fields:
    """The fields of one split's record set, and the nested parts no Croissant type can hold."""

    def __init__(self, split: str, difficulty_keys: list[str]):
        self.split, self.difficulty_keys, self.untyped = split, difficulty_keys, set()

    def field(
        self,
        parent: str,
        name: str,
        kind: tuple[Any, bool] | None,
        description: str,
        column: str,
        json_path: str | None = None,
        sub_fields: list[mlc.Field] | None = None,
        repeated: bool = False,
    ) -> mlc.Field:
        transforms = [mlc.Transform(json_path=json_path)] if json_path else []
        source = (
            None
            if sub_fields
            else mlc.Source(
                file_object=EPISODE_LINES.format(split=self.split),
                extract=mlc.Extract(column=column),
                transforms=transforms,
            )
        )
        return mlc.Field(
            id=f"{parent}/{name}",
            name=name,
            description=description,
            data_types=[kind[0]] if kind else [],
            repeated=repeated or bool(kind and kind[1]),
            source=source,
            sub_fields=sub_fields or [],
        )

    def of_episode(self, name: str, info: Any) -> mlc.Field | None:
        parent, meaning = self.split, info.description or ""
        if kind := _scalar(info.annotation):
            return self.field(parent, name, kind, meaning, name)
        if name == "difficulty" and not self.difficulty_keys:  # no episode has one: nothing to type (Croissant has
            self.untyped.add(name)  # no field without a type or sub-fields)
            return None
        if name == "difficulty":
            subs = [
                self.field(
                    f"{parent}/{name}", key, (mlc.DataType.INTEGER, False), f"Difficulty proxy: {key}.", name, key
                )
                for key in self.difficulty_keys
            ]
            return self.field(parent, name, None, meaning, name, sub_fields=subs)
        if models := _models(info.annotation):
            common = [n for n in models[0].model_fields if all(n in m.model_fields for m in models)]
            subs = []
            for sub in common:
                kinds = {_scalar(m.model_fields[sub].annotation) for m in models}
                if len(kinds) == 1 and (kind := kinds.pop()) is not None:
                    sub_meaning = models[0].model_fields[sub].description or sub
                    subs.append(self.field(f"{parent}/{name}", sub, kind, sub_meaning, name, sub))
                else:
                    self.untyped.add(f"{name}[].{sub}")
            if not subs:
                self.untyped.add(name)
                return None
            return self.field(parent, name, None, meaning, name, sub_fields=subs, repeated=True)
        self.untyped.add(name)
        return None


def _file_object(name: str, sha256: str) -> mlc.FileObject:
    suffix = "." + name.rsplit(".", 1)[-1]
    return mlc.FileObject(id=name, name=name, content_url=name, encoding_formats=[FORMATS[suffix]], sha256=sha256)


def croissant(mapping: CorpusMapping, manifest: dict, difficulty_keys: list[str]) -> dict:
    """The Croissant JSON-LD of a release; its version is the package's semver with the release digest as build
    metadata."""
    files = [
        _file_object(name, info["sha256"])
        for name, info in sorted(manifest["files"].items())
        if "." + name.rsplit(".", 1)[-1] in FORMATS
    ]
    record_sets = []
    for split in SPLITS:
        fields = _Fields(split, difficulty_keys)
        typed = [f for name, info in Episode.model_fields.items() if (f := fields.of_episode(name, info)) is not None]
        untyped = ", ".join(sorted(fields.untyped))
        record_sets.append(
            mlc.RecordSet(
                id=split,
                name=split,
                key=[f"{split}/id"],
                fields=typed,
                description=f"The {split} split: one episode per line of {EPISODE_LINES.format(split=split)}. Nested "
                f"parts "
                f"whose keys vary by family are not typed here ({untyped}); they are in the same line, and "
                "`datasets.load_dataset('json', ...)` loads them whole.",
            )
        )
    logger = logging.getLogger("absl")
    level, logger.level = (
        logger.level,
        logging.ERROR,
    )  # mlcroissant logs its validation warnings; we raise on them below
    try:
        metadata = mlc.Metadata(
            name=f"telemetry-bench-{mapping.name}",
            description=f"Multi-turn tool-using agent episodes compiled from {mapping.title}.",
            cite_as=mapping.citation or mapping.title,
            license=[mapping.license_url or mapping.license],
            version=f"{__version__}+{manifest['release_version']}",
            keywords=["agents", "tool-use", "telemetry", "time-series"],
            distribution=files,
            record_sets=record_sets,
        )
    except mlc.ValidationError as exc:
        raise StageError(f"{mapping.name}: croissant.json does not validate: {_first_issue(str(exc))}") from exc
    finally:
        logger.level = level
    if metadata.issues.errors:
        report = metadata.issues.report()
        raise StageError(f"{mapping.name}: croissant.json does not validate: {_first_issue(report)}")
    return metadata.to_json()


def _first_issue(report: str) -> str:
    """mlcroissant's report (a count, then one line per issue naming its node) as one line: the first issue, its node
    path (e.g. RecordSet(train) > Field(difficulty)) first, and how many others there are."""
    issues = [line.strip().lstrip("-").strip() for line in report.splitlines() if line.strip().startswith("-")]
    if not issues:
        return " ".join(report.split())
    more = f" (and {len(issues) - 1} more)" if len(issues) > 1 else ""
    return " ".join(issues[0].split()) + more
