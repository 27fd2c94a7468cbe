"""data/raw/<corpus> as the mapping declares it, read with plain readers: every value cell as (stream, UTC time, text).

Nothing here imports pipeline/: the layout (wide, file per stream, a site column, a zip member), the points (inline,
a points table, Brick graphs read with rdflib) and the time rule (strftime or ISO 8601, zoneinfo, the earlier offset
of a repeated local hour, a local time that does not exist dropped) are written again from docs/ingest.md."""

from __future__ import annotations

import csv
import io
import re
import tomllib
import zipfile
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import numpy as np
import pandas as pd

HOUR_US = 3_600_000_000


@dataclass
class Point:
    """What the mapping says a stream is."""

    stream_id: str
    site_id: str
    point_class: str
    unit: str | None
    equipment: str | None  # the full equipment id, '<site>.<key>' for inline and table points
    counter: dict | None  # the [counter] table of an inline point, or None


@dataclass
class Cells:
    """The value cells of one stream, in file order (files sorted, rows as read): UTC time (us, or -1 when the time
    did not read) and the cell's text."""

    point: Point
    ts: list[np.ndarray] = field(default_factory=list)
    text: list[np.ndarray] = field(default_factory=list)
    dropout: list[np.ndarray] = field(default_factory=list)  # the row's value cells all read 0 or nothing


def mapping(root: Path, corpus: str) -> dict:
    return tomllib.loads((root / "configs" / "corpora" / f"{corpus}.toml").read_text(encoding="utf-8"))


def _natural(path: str) -> list:
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", path)]


def value_files(raw: Path, values: dict) -> list[tuple[Path, str, dict]]:
    """(path, path relative to the corpus, the file pattern's groups) of every value file, in natural path order."""
    pattern = re.compile(values["file_pattern"])
    found = []
    for path in raw.glob(values["files"]):
        rel = path.relative_to(raw).as_posix()
        match = pattern.fullmatch(rel if "/" in values["file_pattern"] else path.name)
        if match and path.is_file():
            found.append((path, rel, match.groupdict()))
    return sorted(found, key=lambda item: _natural(item[1]))


def _text(path: Path, values: dict) -> str:
    if not values.get("archive_member"):
        return path.read_text(encoding=values.get("encoding", "utf-8"))
    member = re.compile(values["archive_member"])
    with zipfile.ZipFile(path) as archive:
        (name,) = [n for n in archive.namelist() if member.fullmatch(n)]
        return archive.read(name).decode(values.get("encoding", "utf-8"))


def read_frame(path: Path, values: dict) -> pd.DataFrame:
    """The file's records as text, columns named by the header or by `columns`."""
    frame = pd.read_csv(
        io.StringIO(_text(path, values)),
        sep=values.get("delimiter", ","),
        dtype=str,
        keep_default_na=False,
        header=0 if values.get("header", True) else None,
        quoting=csv.QUOTE_MINIMAL,
    )
    if values.get("columns"):
        frame.columns = values["columns"]
    return frame


def _offsets(hours: np.ndarray, zone: ZoneInfo) -> tuple[np.ndarray, np.ndarray]:
    """UTC offset (us) of each naive local hour start (the earlier offset where the hour repeats) and whether the hour
    exists. The shipped zones move their clocks at whole hours, so an hour decides every instant in it."""
    offsets, exists = np.zeros(len(hours), dtype=np.int64), np.ones(len(hours), dtype=bool)
    for i, hour in enumerate(hours.tolist()):
        naive = datetime(1970, 1, 1) + pd.Timedelta(microseconds=hour).to_pytimedelta()
        local = naive.replace(tzinfo=zone, fold=0)
        back = local.astimezone(UTC).astimezone(zone).replace(tzinfo=None)
        exists[i] = back == naive
        offsets[i] = int(local.utcoffset().total_seconds()) * 1_000_000
    return offsets, exists


def parse_times(texts: pd.Series, fmt: str, zone_name: str) -> np.ndarray:
    """Epoch microseconds UTC of each time text; -1 where it does not read or the local time does not exist."""
    if fmt.startswith("epoch_"):
        scale = {"epoch_s": 1_000_000, "epoch_ms": 1_000, "epoch_us": 1}[fmt]
        return (pd.to_numeric(texts, errors="coerce") * scale).fillna(-1).astype(np.int64).to_numpy()
    if fmt == "iso8601":
        parsed = pd.to_datetime(texts, format="ISO8601", errors="coerce", utc=False)
    else:
        parsed = pd.to_datetime(texts, format=fmt, errors="coerce")
    if getattr(parsed.dt, "tz", None) is not None:
        return parsed.dt.tz_convert("UTC").dt.tz_localize(None).astype("datetime64[us]").astype(np.int64).to_numpy()
    bad = parsed.isna().to_numpy()
    naive = parsed.astype("datetime64[us]").astype(np.int64).to_numpy()
    if zone_name == "UTC":
        return np.where(bad, -1, naive)
    hours, inverse = np.unique(np.floor_divide(naive[~bad], HOUR_US) * HOUR_US, return_inverse=True)
    offsets, exists = _offsets(hours, ZoneInfo(zone_name))
    out = np.full(len(naive), -1, dtype=np.int64)
    utc = naive[~bad] - offsets[inverse]
    out[~bad] = np.where(exists[inverse], utc, -1)
    return out


BRICK = "https://brickschema.org/schema/Brick#"
REF = "https://brickschema.org/schema/Brick/ref#"
SITE_CLASSES = ("https://w3id.org/rec#Building", "https://brickschema.org/schema/Brick#Building")


def _local(iri: object) -> str:
    text = str(iri).rstrip("#/")
    return re.split(r"[#/]", text)[-1]


def brick_points(folder: Path, files: str, site_template: str) -> dict[tuple[str, str], Point]:
    """(value file name, column) -> point, from Brick graphs: a point's class is its Brick type, its equipment the
    smallest of what has it as a point (else as a part), its column the timeseries reference it is stored at."""
    import rdflib

    out: dict[tuple[str, str], Point] = {}
    for path in sorted(folder.glob(files)):
        graph = rdflib.Graph().parse(path, format="turtle")
        rdf_type = rdflib.RDF.type
        (site_iri,) = sorted({s for c in SITE_CLASSES for s in graph.subjects(rdf_type, rdflib.URIRef(c))})
        site_id = site_template.format(local=_local(site_iri))
        ref = rdflib.Namespace(REF)
        brick = rdflib.Namespace(BRICK)
        for node, reference in sorted(graph.subject_objects(ref.hasExternalReference)):
            column = sorted(str(x) for x in graph.objects(reference, ref.hasTimeseriesId))
            stored = sorted(str(x) for x in graph.objects(reference, ref.storedAt))
            if not column or not stored:
                continue
            types = sorted(str(t) for t in graph.objects(node, rdf_type))
            strong = {*graph.subjects(brick.hasPoint, node), *graph.objects(node, brick.isPointOf)}
            weak = {*graph.subjects(brick.hasPart, node), *graph.objects(node, brick.isPartOf)}
            equipment = sorted(str(e) for e in (strong or weak))
            units = sorted(str(u) for u in graph.objects(node, brick.hasUnit))
            out.setdefault(
                (stored[0], column[0]),
                Point(
                    stream_id="",
                    site_id=site_id,
                    point_class=_local(([t for t in types if t.startswith(BRICK)] or types)[0]),
                    unit=_local(units[0]) if units else None,
                    equipment=_local(equipment[0]) if equipment else None,
                    counter=None,
                ),
            )
    return out


def _table_points(root: Path, corpus: str, raw: Path, meta: dict) -> dict[str, dict]:
    folder = root / "configs" / "corpora" / corpus if meta.get("location") == "config" else raw
    with open(folder / meta["file"], encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    return {
        row[meta["key_column"]]: {
            "point_class": row[meta["point_class_column"]],
            "unit": row.get(meta.get("unit_column") or "") or None,
            "equipment": row.get(meta.get("equipment_column") or "") or None,
        }
        for row in rows
    }


class Points:
    """The point of a (file, site, stream key), by the mapping's metadata kind."""

    def __init__(self, root: Path, corpus: str, spec: dict) -> None:
        self.meta, self.values = spec["metadata"], spec["values"]
        kind = self.meta["kind"]
        self.inline = self.meta.get("points", {}) if kind == "inline" else {}
        raw = root / (spec.get("raw_dir") or f"data/raw/{corpus}")
        self.table = _table_points(root, corpus, raw, self.meta) if kind == "table" else {}
        self.brick = (
            brick_points(raw, self.meta["files"], self.meta.get("site_id", "{local}")) if kind == "brick" else {}
        )

    def point(self, file_name: str, site: str | None, key: str, groups: dict) -> Point | None:
        if self.brick:
            found = self.brick.get((file_name, key))
            if found is None:
                return None  # a column no point refers to: every cell rejected (unmapped_column)
            site = found.site_id
            spec = {"point_class": found.point_class, "unit": found.unit, "equipment": found.equipment}
            equipment = found.equipment
        else:
            spec = self.inline.get(key) or self.table.get(key)
            if spec is None:
                return None
            equipment = f"{site}.{spec['equipment']}" if spec.get("equipment") else None
        template = self.values.get("stream_id", "{site}__{key}")
        stream_id = template.format(**{**groups, "site": site, "key": key})
        return Point(stream_id, site, spec["point_class"], spec.get("unit"), equipment, spec.get("counter"))


def collect(root: Path, corpus: str) -> tuple[dict, dict[str, Cells]]:
    """(the mapping, stream id -> its value cells) of a corpus."""
    spec = mapping(root, corpus)
    values, time = spec["values"], spec["time"]
    assert time.get("ambiguous", "earliest") == "earliest", "the second route reads repeated hours as the earlier"
    assert not time.get("file_formats"), "the second route reads one time format per corpus"
    raw = root / (spec.get("raw_dir") or f"data/raw/{corpus}")
    points = Points(root, corpus, spec)
    streams: dict[str, Cells] = {}
    for path, _rel, groups in value_files(raw, values):
        frame = read_frame(path, values)
        ts = parse_times(frame[time["column"]], time["format"], time.get("timezone", "UTC"))
        if values["kind"] == "file_per_stream":
            key = values["key"].format(**groups) if values.get("key") else groups["key"]
            columns = {values["value_column"]: key}
        else:
            skip = {time["column"], values.get("site_column"), *values.get("ignore_columns", [])}
            columns = {c: c for c in frame.columns if c not in skip}
        texts = {c: frame[c].str.strip().to_numpy() for c in columns}
        dropout = _dropout_rows(texts, spec["cleaning"])
        if values.get("site_column"):
            site_cells = frame[values["site_column"]].to_numpy()
            row_sites = [(s, site_cells == s) for s in sorted(set(site_cells.tolist()) - {""})]
        else:
            site = values["site"].format(**groups) if values.get("site") else None
            row_sites = [(site, np.ones(len(frame), dtype=bool))]
        for site_key, rows in row_sites:
            site = values.get("site", "{site}").format(**{**groups, "site": site_key}) if site_key else None
            for column, key in columns.items():
                point = points.point(path.name, site, key, groups)
                if point is None:
                    continue
                cells = streams.setdefault(point.stream_id, Cells(point))
                keep = rows & (ts >= 0)
                cells.ts.append(ts[keep])
                cells.text.append(texts[column][keep])
                cells.dropout.append(dropout[keep])
    return spec, streams


def _dropout_rows(texts: dict[str, np.ndarray], cleaning: dict) -> np.ndarray:
    """Rows whose value cells all read 0 or nothing, at least one of them 0 (cleaning.dropout_rows)."""
    n = len(next(iter(texts.values()))) if texts else 0
    if not cleaning.get("dropout_rows") or not texts:
        return np.zeros(n, dtype=bool)
    missing = set(cleaning.get("missing_tokens", ["", "NA"]))
    numbers = {c: pd.to_numeric(pd.Series(t), errors="coerce").to_numpy() for c, t in texts.items()}
    zero = [numbers[c] == 0 for c in texts]
    empty = [np.isin(texts[c], list(missing)) for c in texts]
    return np.logical_and.reduce([z | e for z, e in zip(zero, empty, strict=True)]) & np.logical_or.reduce(zero)
