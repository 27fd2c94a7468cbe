"""long_csv and file_per_stream give the same observations as wide_csv on the same real rows."""

from __future__ import annotations

import re

import polars as pl

from tests.helpers import ingest, make_workspace, mapping, real_lines, xai_config

LINES = real_lines("xai4heat/xai4heat_scada_L4.csv", range(36000, 36040))
COLUMNS = LINES[0].split(",")[1:]


def _values_block(block: str, **over: str) -> str:
    text = xai_config(held_out_sites="[]", dropout_rows="false", **over)
    return re.sub(r"\[values\]\n(?:.+\n)+", lambda _: block, text, count=1)


def _wide(tmp_path) -> pl.DataFrame:
    text = xai_config(held_out_sites="[]", dropout_rows="false")
    ws = make_workspace(tmp_path / "wide", "xai4heat", text, {"xai4heat_scada_L4.csv": "\n".join(LINES) + "\n"})
    return ingest(ws, "xai4heat")


def _long_rows() -> list[list[str]]:
    rows = []
    for line in LINES[1:]:
        cells = line.split(",")
        rows += [[cells[0], column, value] for column, value in zip(COLUMNS, cells[1:], strict=True)]
    return rows


def test_long_csv_matches_wide(tmp_path):
    block = (
        '[values]\nkind = "long_csv"\nfiles = "*_long.csv"\nfile_pattern = \'(?P<site>L\\d+)_long\\.csv\'\n'
        'site = "{site}"\nstream_column = "stream"\nvalue_column = "value"\n'
    )
    text = (
        _values_block(block)
        .replace('column = "datetime"', 'column = "time"')
        .replace('row_order = "descending"', 'row_order = "any"')
    )
    body = "time,stream,value\n" + "".join(",".join(r) + "\n" for r in _long_rows())
    ws = make_workspace(tmp_path / "long", "xai4heat", text, {"L4_long.csv": body})
    long, wide = ingest(ws, "xai4heat"), _wide(tmp_path)
    assert long["observations"].equals(wide["observations"])
    assert long["streams"].drop("source_file").equals(wide["streams"].drop("source_file"))
    assert long["rejects"].height == wide["rejects"].height


def test_file_per_stream_matches_wide(tmp_path):
    block = (
        '[values]\nkind = "file_per_stream"\nfiles = "streams/*.csv"\n'
        'file_pattern = \'(?P<site>L\\d+)__(?P<key>\\w+)\\.csv\'\nsite = "{site}"\nvalue_column = "value"\n'
    )
    text = _values_block(block)
    files = {}
    for index, column in enumerate(COLUMNS, start=1):
        body = "datetime,value\n" + "".join(f"{line.split(',')[0]},{line.split(',')[index]}\n" for line in LINES[1:])
        files[f"streams/L4__{column}.csv"] = body
    ws = make_workspace(tmp_path / "fps", "xai4heat", text, files)
    per_stream, wide = ingest(ws, "xai4heat"), _wide(tmp_path)
    assert per_stream["observations"].equals(wide["observations"])
    assert per_stream["rejects"].height == wide["rejects"].height
    assert sorted(per_stream["streams"]["source_file"]) == sorted(f"streams/L4__{c}.csv" for c in COLUMNS)


def test_table_metadata_with_long_csv(tmp_path):
    block = (
        '[values]\nkind = "long_csv"\nfiles = "*_long.csv"\nfile_pattern = \'(?P<site>L\\d+)_long\\.csv\'\n'
        'site = "{site}"\nstream_column = "stream"\nvalue_column = "value"\n'
    )
    text = (
        _values_block(block)
        .replace('column = "datetime"', 'column = "time"')
        .replace('row_order = "descending"', 'row_order = "any"')
    )
    metadata = (
        '[metadata]\nkind = "table"\nfile = "points.csv"\nkey_column = "key"\npoint_class_column = "class"\n'
        'label_column = "label"\nunit_column = "unit"\nequipment_column = "equipment"\n\n'
    )
    text = re.sub(r"\[metadata\]\n(?:.*\n)*?(?=\[cleaning\])", lambda _: metadata, text, count=1)
    points = "key,class,label,unit,equipment\n" + "".join(
        f"{c},{'Energy_Counter' if c == 'e' else 'Temperature_Sensor'},{c} at {{site}},DEG_C,loop\n" for c in COLUMNS
    )
    body = "time,stream,value\n" + "".join(",".join(r) + "\n" for r in _long_rows())
    ws = make_workspace(tmp_path, "xai4heat", text, {"L4_long.csv": body, "points.csv": points})
    tables = ingest(ws, "xai4heat")
    streams = tables["streams"]
    assert streams.height == 8 and set(streams["unit"]) == {"DEG_C"}
    assert streams.filter(pl.col("stream_id") == "L4__t_amb")["label"].item() == "t_amb at L4"
    assert tables["observations"].height + tables["rejects"].height == len(_long_rows())


def test_a_time_column_with_an_empty_name_is_read(tmp_path):
    """A pandas index written by to_csv has an empty header cell (`,t_amb,...`): `time.column = ""` names it, as the
    draft proposes, and the values are those of the named column."""
    unnamed = ["," + ",".join(COLUMNS)] + LINES[1:]
    text = re.sub(r'column = "datetime"', 'column = ""', xai_config(held_out_sites="[]", dropout_rows="false"))
    ws = make_workspace(tmp_path / "unnamed", "xai4heat", text, {"xai4heat_scada_L4.csv": "\n".join(unnamed) + "\n"})
    assert ingest(ws, "xai4heat")["observations"].equals(_wide(tmp_path)["observations"])


def _per_stream_project(tmp_path, bodies: dict[str, str], formats: str = ""):
    block = (
        '[values]\nkind = "file_per_stream"\nfiles = "streams/*.csv"\n'
        'file_pattern = \'(?P<site>L\\d+)__(?P<key>\\w+)\\.csv\'\nsite = "{site}"\nvalue_column = "v*"\n'
    )
    text = _values_block(block)
    if formats:
        text = text.replace("[time]\n", "[time]\n" + formats, 1)
    return make_workspace(tmp_path, "xai4heat", text, bodies)


def _reads(ws, scope, together: bool):
    from pipeline.core.executor import Scope  # noqa: F401 (the scope's type)
    from pipeline.ingest.batch import value_files
    from pipeline.ingest.layouts import read_file_per_stream, read_files_per_stream
    from pipeline.ingest.metadata import Resolver

    m = mapping(ws, "xai4heat")
    raw = ws.root / "data" / "raw" / "xai4heat"
    resolver = Resolver(m, raw)
    files = value_files(raw, m)
    if together:
        return read_files_per_stream(files, m, resolver, scope)
    return [read_file_per_stream(path, rel, m, resolver, scope) for path, rel in files]


def test_files_per_stream_read_together_are_the_reads_file_by_file(tmp_path, monkeypatch):
    """Times of many files parsed as one column (layouts.read_files_per_stream) give each file the frame, slices and
    set-aside records a read of that file alone gives: value columns named differently in each file (a pattern), a
    file_formats entry that gives some files another time format, a flush every few rows, files of streams another
    batch owns between them, and the errors of the first bad file, in file order."""
    from pipeline.core.errors import IngestError
    from pipeline.core.executor import scopes
    from pipeline.ingest import layouts

    bodies = {}
    for index, column in enumerate(COLUMNS, start=1):
        rows = [(line.split(",")[0], line.split(",")[index]) for line in LINES[1:]]
        if index % 3 == 0:  # another format for these files: day first, as time.file_formats says
            rows = [(f"{t[8:10]}.{t[5:7]}.{t[0:4]} {t[11:]}", v) for t, v in rows]
        rows[index % len(rows)] = ("not a time", rows[index % len(rows)][1])
        bodies[f"streams/L4__{column}.csv"] = f"datetime,v_{column}\n" + "".join(f"{t},{v}\n" for t, v in rows)
    formats = "file_formats = [{ files = 'streams/L4__(t_sup_prim|t_ret_sec)\\.csv', format = '%d.%m.%Y %H:%M:%S' }]\n"
    ws = _per_stream_project(tmp_path / "ok", bodies, formats)
    monkeypatch.setattr(layouts, "PARSE_ROWS", 70)  # a flush every two files or so
    for scope in [scopes(1, 1)[0], *scopes(2, 1)]:
        together, alone = _reads(ws, scope, True), _reads(ws, scope, False)
        assert [r is None for r in together] == [r is None for r in alone]
        assert any(r is not None for r in alone)
        for a, b in zip(together, alone, strict=True):
            if b is not None:
                assert a.frame.equals(b.frame) and a.frame.columns == b.frame.columns
                assert (a.rel, a.slices, a.malformed, a.value_labels, a.cells) == (
                    b.rel,
                    b.slices,
                    b.malformed,
                    b.value_labels,
                    b.cells,
                )
                assert a.frame["ts_reason"].drop_nulls().to_list() == ["bad_timestamp"]

    # The second file's times all fail and the fourth has no value column: the second's error comes first, naming
    # the file_formats entry of its own (one that gives the first file's format, so the two are parsed together).
    broken = dict(bodies)
    second, fourth = sorted(broken)[1], sorted(broken)[3]
    broken[second] = "datetime,v_x\n" + "".join(f"never,{n}\n" for n in range(3))
    broken[fourth] = "datetime,other\n2024-01-01 00:00:00,1\n"
    same = formats.replace(" }]", f" }}, {{ files = '{second}', format = '%Y-%m-%d %H:%M:%S' }}]")
    ws = _per_stream_project(tmp_path / "broken", broken, same)
    for together in (True, False):
        try:
            _reads(ws, scopes(1, 1)[0], together)
        except IngestError as exc:
            said = str(exc)
        assert said.startswith(f"{ws.root / 'data' / 'raw' / 'xai4heat' / second}: row 2: no value of time column")
        assert said.endswith(f"fix the format of time.file_formats entry 2 ({second!r})"), said
