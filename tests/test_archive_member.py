"""values.archive_member: a CSV value file shipped inside its upstream zip archive (daiad's swm_trialA.zip) is read as
the one member the regex matches, and gives the same tables as the extracted file; every other case is one error line
naming the archive."""

from __future__ import annotations

import io
import re
import zipfile

import pytest

from pipeline.core.errors import IngestError
from tests.helpers import ingest, make_workspace, mapping, real_lines, xai_config

LINES = real_lines("xai4heat/xai4heat_scada_L4.csv", range(36000, 36040))
BODY = "\n".join(LINES) + "\n"


def _zip(members: dict[str, str], method: int = zipfile.ZIP_DEFLATED) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=method) as archive:
        for name, text in members.items():
            archive.writestr(name, text)
    return buffer.getvalue()


def _config(member: str | None, files: str = "*.zip") -> str:
    text = xai_config(held_out_sites="[]", dropout_rows="false", files=f'"{files}"')
    pattern = r"xai4heat_scada_(?P<site>L\d+)\.zip" if files.endswith(".zip") else r"xai4heat_scada_(?P<site>L\d+)\.csv"
    text = re.sub(r"^file_pattern = .*$", lambda _: f"file_pattern = '{pattern}'", text, count=1, flags=re.MULTILINE)
    if member is not None:
        text = text.replace('kind = "wide_csv"', f"kind = \"wide_csv\"\narchive_member = '{member}'", 1)
    return text


def test_a_member_of_a_zip_archive_gives_the_tables_of_the_extracted_file(tmp_path):
    plain = ingest(
        make_workspace(tmp_path / "plain", "xai4heat", _config(None, "*.csv"), {"xai4heat_scada_L4.csv": BODY}),
        "xai4heat",
    )
    archive = _zip({"__MACOSX/._xai4heat_scada_L4.csv": "resource fork", "xai4heat_scada_L4.csv": BODY})
    zipped = ingest(
        make_workspace(tmp_path / "zip", "xai4heat", _config(r"[^/]+\.csv"), {"xai4heat_scada_L4.zip": archive}),
        "xai4heat",
    )
    assert zipped["observations"].equals(plain["observations"])
    assert zipped["rejects"].drop("source").equals(plain["rejects"].drop("source"))
    assert set(zipped["rejects"]["source"]) == {"xai4heat_scada_L4.zip"}  # a reject names the archive it came from
    assert zipped["streams"].drop("source_file").equals(plain["streams"].drop("source_file"))
    assert set(zipped["streams"]["source_file"]) == {"xai4heat_scada_L4.zip"}


@pytest.mark.parametrize(
    ("members", "member", "message"),
    [
        ({"a.csv": BODY, "b.csv": BODY}, r".*\.csv", "matches 2 members (a.csv, b.csv)"),
        ({"data.txt": BODY}, r".*\.csv", "matches no member; the archive holds data.txt"),
    ],
)
def test_a_regex_matching_no_member_or_several_is_one_error_line(tmp_path, members, member, message):
    ws = make_workspace(tmp_path, "xai4heat", _config(member), {"xai4heat_scada_L4.zip": _zip(members)})
    with pytest.raises(IngestError, match=re.escape(message)) as caught:
        ingest(ws, "xai4heat")
    assert "xai4heat_scada_L4.zip" in str(caught.value) and "\n" not in str(caught.value)


def test_a_value_file_that_is_no_zip_archive_is_one_error_line(tmp_path):
    ws = make_workspace(tmp_path, "xai4heat", _config(r".*\.csv"), {"xai4heat_scada_L4.zip": BODY})
    with pytest.raises(IngestError, match="not a zip archive"):
        ingest(ws, "xai4heat")


def test_a_member_larger_than_max_member_bytes_is_refused_unread(tmp_path):
    text = _config(r".*\.csv").replace('kind = "wide_csv"', 'kind = "wide_csv"\nmax_member_bytes = 1000', 1)
    ws = make_workspace(tmp_path, "xai4heat", text, {"xai4heat_scada_L4.zip": _zip({"x.csv": BODY})})
    with pytest.raises(IngestError, match=rf"x\.csv: declares {len(BODY.encode()):,} bytes, more than 1,000;"):
        ingest(ws, "xai4heat")


def _declaring(data: bytes, size: int) -> bytes:
    """The archive with every header's uncompressed size set to `size` (what zipfile inflates at most)."""
    out = bytearray(data)
    for signature, offset in ((b"PK\x03\x04", 22), (b"PK\x01\x02", 24)):
        at = out.find(signature)
        out[at + offset : at + offset + 4] = size.to_bytes(4, "little")
    return bytes(out)


def test_a_member_declaring_gigabytes_is_refused_by_the_plan_before_any_worker_inflates_it(tmp_path, monkeypatch):
    """Issue 53: a 2 MB archive holding 2 GiB of newlines kept two workers at 2.3-3.0 GB each for over 600 s, each
    inflating 1 GiB before refusing it. zipfile inflates no more than a member declares, so the plan (one process,
    before any batch) refuses it by what it declares; nothing is inflated (measured on the real 2 GiB member: refused
    in 2.1 s at a peak RSS of 146 MB, docs/benchmarks.md)."""
    from pipeline.core.executor import Resources
    from pipeline.ingest import stage

    archive = _declaring(_zip({"x.csv": BODY}), 3_000_000_000)
    ws = make_workspace(tmp_path, "xai4heat", _config(r".*\.csv"), {"xai4heat_scada_L4.zip": archive})
    monkeypatch.setattr(zipfile.ZipFile, "open", lambda *a, **k: pytest.fail("a refused member was inflated"))
    with pytest.raises(IngestError, match=r"L4\.zip:x\.csv: declares 3,000,000,000 bytes, more than 1,073,741,824;"):
        stage.plan(mapping(ws, "xai4heat"), ws.raw_dir("xai4heat"), tmp_path / "out", Resources(workers=2))


def test_a_member_holding_more_than_it_declares_is_one_error_line(tmp_path):
    """zipfile stops at the declared size, and the cut member fails its CRC: never more bytes than declared."""
    archive = _declaring(_zip({"x.csv": BODY}), 100)
    ws = make_workspace(tmp_path, "xai4heat", _config(r".*\.csv"), {"xai4heat_scada_L4.zip": archive})
    with pytest.raises(IngestError, match=r"x\.csv: the member cannot be inflated \(Bad CRC-32") as caught:
        ingest(ws, "xai4heat")
    assert "\n" not in str(caught.value)


def test_errors_inside_the_member_name_it_in_its_archive(tmp_path):
    body = BODY.replace("datetime,", "time,", 1)  # the declared time column is absent
    ws = make_workspace(tmp_path, "xai4heat", _config(r".*\.csv"), {"xai4heat_scada_L4.zip": _zip({"x.csv": body})})
    with pytest.raises(IngestError, match=r"xai4heat_scada_L4\.zip:x\.csv: "):
        ingest(ws, "xai4heat")


def _encrypted(data: bytes) -> bytes:
    """The archive with the "encrypted" flag (bit 0) set in every local and central header (zipfile never writes it)."""
    out = bytearray(data)
    for signature, offset in ((b"PK\x03\x04", 6), (b"PK\x01\x02", 8)):
        at = out.find(signature)
        while at != -1:
            out[at + offset] |= 0x1
            at = out.find(signature, at + 4)
    return bytes(out)


def test_an_encrypted_member_is_one_error_line(tmp_path):
    archive = _encrypted(_zip({"x.csv": BODY}))
    with zipfile.ZipFile(io.BytesIO(archive)) as check:
        assert check.getinfo("x.csv").flag_bits & 0x1
    ws = make_workspace(tmp_path, "xai4heat", _config(r".*\.csv"), {"xai4heat_scada_L4.zip": archive})
    with pytest.raises(IngestError, match=r"x\.csv: the member is encrypted .*extract it with its password") as caught:
        ingest(ws, "xai4heat")
    assert "\n" not in str(caught.value)


def test_a_backtracking_member_regex_ends_in_one_line(tmp_path):
    """(a+)+ against 40 a's and a '!' backtracks 2**40 ways under re; the bounded matcher ends it."""
    archive = _zip({"a" * 40 + "!.csv": BODY})
    ws = make_workspace(tmp_path, "xai4heat", _config(r"(a+)+\.csv"), {"xai4heat_scada_L4.zip": archive})
    with pytest.raises(IngestError, match="matches no member") as caught:
        ingest(ws, "xai4heat")
    assert "\n" not in str(caught.value)
