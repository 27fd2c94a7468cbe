"""Corpus mappings: how one raw corpus becomes normalized tables (configs/corpora/<name>.toml)."""

from __future__ import annotations

import re
import string
from typing import Annotated, Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from contracts.base import Frozen, Grown
from contracts.corpus_metadata import BrickMetadata, Metadata, Silence
from contracts.corpus_metadata import iana_zone as _iana_zone
from contracts.corpus_metadata import regex as _regex
from contracts.tasks import SplitKind, SplitOverrides

TIME_FORMATS_NAMED = ("iso8601", "epoch_s", "epoch_ms", "epoch_us")
CORPUS_NAME = r"^[a-z0-9][a-z0-9_-]*$"  # a corpus name names folders (artifacts/<name>/): never a path
CorpusName = Annotated[str, Field(pattern=CORPUS_NAME)]


def _known_time_format(value: str) -> str:
    if value not in TIME_FORMATS_NAMED and "%" not in value:
        raise ValueError(
            f"unknown time format {value!r}: use one of {', '.join(TIME_FORMATS_NAMED)} or a strftime pattern with "
            f"% codes"
        )
    return value


class FileTimeFormat(Frozen):
    """A time format (and zone) for the files whose relative path matches a regex."""

    files: str = Field(
        description="Regex fully matched against the file's POSIX path relative to the corpus folder, e.g. "
        "'b1/.*' or '.*/2019\\.csv'."
    )
    format: str = Field(description="The format of these files' time column (as time.format).")
    timezone: str | None = Field(
        None, description="IANA zone of these files' naive timestamps (default time.timezone)."
    )

    @field_validator("format")
    @classmethod
    def _known_format(cls, value: str) -> str:
        return _known_time_format(value)

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, value: str | None) -> str | None:
        return _iana_zone(value)

    @field_validator("files")
    @classmethod
    def _compiles(cls, value: str) -> str:
        return _regex(value, "files")


class TimeSpec(Frozen):
    """How the time column is read and turned into UTC."""

    column: str = Field(description="Name of the time column in the raw files.")
    format: str = Field(
        description="'iso8601', 'epoch_s', 'epoch_ms', 'epoch_us', or a strftime pattern (e.g. '%Y-%m-%d %H:%M:%S'; "
        "'... %:z' for an offset after a space; '... %Z' for a zone abbreviation such as CST, read with the offset the "
        "timezone gives it).",
    )
    timezone: str = Field("UTC", description="IANA zone of naive (offset-free) timestamps.")
    ambiguous: Literal["earliest", "latest", "reject"] = Field(
        "earliest",
        description="Local times that occur twice (DST fall-back): the earlier (summer) offset, the later, or reject.",
    )
    row_order: Literal["ascending", "descending", "any"] = Field(
        "any", description="Declared order of rows by time; a file that breaks it is an error naming the row."
    )
    file_formats: list[FileTimeFormat] = Field(
        default=[],
        description="Per-file overrides: the first entry whose `files` regex fully matches a file's relative path "
        "gives that file's format (and timezone, if it sets one) instead of `format` (and `timezone`).",
    )

    @field_validator("format")
    @classmethod
    def _known_format(cls, value: str) -> str:
        return _known_time_format(value)

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, value: str | None) -> str | None:
        return _iana_zone(value)


class _CsvFiles(Grown):
    ADDED = ("exclude",)

    files: str = Field(description="Glob of value files relative to the corpus folder.")
    exclude: list[str] = Field(
        default=[],
        description="Globs (relative to the corpus folder) of files `files` matches that are not value files, e.g. "
        "an export holding only its header; `corpus draft` writes each with its reason.",
    )
    file_pattern: str = Field(
        description="Regex fully matched against the file name, or, when it holds a '/', against the file's POSIX "
        "path relative to the corpus folder; named groups feed the templates."
    )
    delimiter: str = Field(
        ",", min_length=1, max_length=1, description='The field separator: one character (use "\\t" for tabs).'
    )
    encoding: str = Field("utf-8", description="Text encoding of the files.")
    header: bool = Field(
        True,
        description="The first record names the columns. With false, every record is data and "
        "`columns` names them in order (the first record is row 1).",
    )
    columns: list[str] | None = Field(
        None,
        min_length=1,
        description="Names of the file's columns in order, used instead of "
        "the header (required when header = false; with a header, it renames the header's columns).",
    )
    decimal: Literal[".", ","] = Field(
        ".",
        description='The decimal mark of values: "," for files such as 12,5 (then the delimiter must not be a comma).',
    )
    archive_member: str | None = Field(
        None,
        description="Regex fully matched against the member paths of each value file, which is then a zip archive: "
        "the one member it matches is read as the CSV (others, such as __MACOSX/ entries, are ignored); absent: the "
        "value files are the CSVs themselves.",
    )
    max_member_bytes: int = Field(
        1 << 30,
        gt=0,
        description="With archive_member: a member declaring more bytes than this is an error, found before it is "
        "inflated (zipfile inflates no more than a member declares; what is inflated is counted too).",
    )

    @model_validator(mode="after")
    def _columns_and_decimal(self) -> _CsvFiles:
        if not self.header and not self.columns:
            raise ValueError("header = false needs columns = [...]: the names of the file's columns in order")
        if self.columns and len(set(self.columns)) != len(self.columns):
            raise ValueError(
                f"columns: duplicate names {sorted({c for c in self.columns if self.columns.count(c) > 1})}"
            )
        if self.decimal == "," and self.delimiter == ",":
            raise ValueError(
                'decimal = "," needs another delimiter (the files of decimal-comma locales use ";" or tabs)'
            )
        return self

    @field_validator("file_pattern", "archive_member")
    @classmethod
    def _compiles(cls, value: str | None, info: ValidationInfo) -> str | None:
        return None if value is None else _regex(value, str(info.field_name))

    def pattern_groups(self) -> set[str]:
        """The named groups of file_pattern."""
        return set(re.compile(self.file_pattern).groupindex)


def template_names(template: str) -> set[str]:
    """The field names a str.format template uses ('{site}__{key}' -> {'site', 'key'})."""
    names = set()
    for _, field, _, _ in string.Formatter().parse(template):
        if field is not None:
            names.add(re.split(r"[.\[]", field, maxsplit=1)[0])
    return names


def check_template(template: str, what: str, allowed: set[str]) -> None:
    """A ValueError naming the template's unknown fields and the ones it may use."""
    try:
        names = template_names(template)
    except ValueError as exc:
        raise ValueError(f"{what} template {template!r} is not a valid template: {exc}") from exc
    unknown = sorted(names - allowed)
    if unknown:
        raise ValueError(
            f"{what} template {template!r} names {', '.join('{' + n + '}' for n in unknown)}, which is not available "
            f"(available: {', '.join('{' + n + '}' for n in sorted(allowed)) or 'none'}); capture it as a named "
            "group of file_pattern or fix the template"
        )


def _site_column_field():
    return Field(
        None,
        description="Column holding each row's site key (many sites in one file); {site} in the site template is its "
        "value. A row with an empty cell has its cells rejected (missing_site). Not with brick metadata.",
    )


def _check_site_column(layout: WideCsv | LongCsv, reserved: list[str]) -> None:
    if layout.site_column is None:
        return
    if "site" in layout.pattern_groups():
        raise ValueError(
            "file_pattern captures a group 'site' and site_column is set: {site} would mean two things; rename the "
            "group (e.g. (?P<place>...)) or drop site_column"
        )
    if layout.site_column in reserved:
        raise ValueError(
            f"site_column {layout.site_column!r} is also the time, stream or value column; name the column that "
            "holds the site keys"
        )


class WideCsv(_CsvFiles):
    """One file per site: a time column and one column per stream."""

    kind: Literal["wide_csv"] = Field(description="One file per site: a time column and one column per stream.")
    site: str | None = Field(
        None,
        description="Template of the site key from file_pattern groups (and {site}, the site_column value); absent "
        "when Brick metadata gives sites. With site_column it defaults to '{site}'.",
    )
    stream_id: str = Field(
        "{site}__{key}",
        description="Template of a stream id from {site} (the site key), {key} (the column) and file_pattern groups.",
    )
    ignore_columns: list[str] = Field(default=[], description="Columns that are neither time nor values.")
    site_column: str | None = _site_column_field()

    @model_validator(mode="after")
    def _templates(self) -> WideCsv:
        groups = self.pattern_groups()
        if "key" in groups:
            raise ValueError("file_pattern of wide_csv must not capture a group 'key': {key} is the column name")
        _check_site_column(self, [])
        if self.site is not None:
            check_template(self.site, "values.site", groups | ({"site"} if self.site_column else set()))
        check_template(self.stream_id, "values.stream_id", groups | {"site", "key"})
        if self.site_column is not None and self.site_column in self.ignore_columns:
            raise ValueError(f"site_column {self.site_column!r} is also in ignore_columns; remove it from one of them")
        return self


class LongCsv(_CsvFiles):
    """Rows of (stream, time, value)."""

    kind: Literal["long_csv"] = Field(description="Rows of (stream key, time, value).")
    stream_column: str = Field(description="Column holding each row's stream key.")
    value_column: str = Field(description="Column holding each row's value.")
    site: str = Field(
        "{site}", description="Template of the site key from file_pattern groups (and {site}, the site_column value)."
    )
    stream_id: str = Field(
        "{site}__{key}",
        description="Template from {site} (the site key), {key} (stream column value) and file_pattern groups.",
    )
    site_column: str | None = _site_column_field()

    @model_validator(mode="after")
    def _templates(self) -> LongCsv:
        groups = self.pattern_groups()
        if "key" in groups:
            raise ValueError(
                "file_pattern of long_csv must not capture a group 'key': {key} is the stream column's value"
            )
        _check_site_column(self, [self.stream_column, self.value_column])
        check_template(self.site, "values.site", groups | ({"site"} if self.site_column else set()))
        check_template(self.stream_id, "values.stream_id", groups | {"site", "key"})
        return self


class FilePerStream(_CsvFiles):
    """One file per stream; the stream key comes from the file's path (group 'key', or the `key` template)."""

    kind: Literal["file_per_stream"] = Field(description="One file per stream; its key comes from the file name.")
    value_column: str = Field(description="Column holding the values (name it in `columns` when there is no header).")
    site: str = Field("{site}", description="Template of the site key from file_pattern groups.")
    stream_id: str = Field(
        "{site}__{key}", description="Template from {site} (the site key), {key} and file_pattern groups."
    )
    key: str | None = Field(
        None,
        description="Template of the stream key from file_pattern groups, e.g. '{meter}'; absent: the group "
        "(?P<key>...). Files giving one stream id (shards: years, parts) become one stream.",
    )

    @model_validator(mode="after")
    def _has_key_group(self) -> FilePerStream:
        groups = self.pattern_groups()
        if self.key is None and "key" not in groups:
            raise ValueError(
                "file_pattern of file_per_stream needs a named group (?P<key>...) for the stream key, or set "
                'values.key to a template of other groups (e.g. key = "{meter}")'
            )
        if self.key is not None:
            if "key" in groups:
                raise ValueError("values.key is set and file_pattern captures a group 'key': keep one of them")
            check_template(self.key, "values.key", groups)
        check_template(self.site, "values.site", groups)
        check_template(self.stream_id, "values.stream_id", groups | {"site", "key"})
        return self


class BtsPickle(Frozen):
    """BTS raw format: zip archives (or folders) of pickles [StreamID, timestamps, values], one member per stream."""

    kind: Literal["bts_pickle"] = Field(
        description="BTS archives or folders of pickles [StreamID, timestamps, values]."
    )
    files: str = Field(
        description="Glob of archives (.zip) or folders relative to the corpus folder, e.g. 'Site_*aa.zip'."
    )
    member_pattern: str = Field(
        r"(?:.*/)?(?P<key>[^/]+)\.pickle", description="Regex on member paths; group 'key' is the stream key."
    )
    site: str | None = Field(None, description="Site template; absent with Brick metadata (the graph's site).")
    stream_id: str = Field("{key}", description="Template of a stream id from {site} and {key}.")
    max_member_bytes: int = Field(512 * 1024 * 1024, gt=0, description="Members larger than this are rejected unread.")
    metadata_csv: str | None = Field(
        "Site_*_metadata.csv",
        description="Glob of the per-stream statistics CSV (StreamID, Brick, count...), cross-checked against the "
        "pickles.",
    )


Values = Annotated[WideCsv | LongCsv | FilePerStream | BtsPickle, Field(discriminator="kind")]


class RejectLimit(Frozen):
    """This corpus's own limit on the share of a file's cells one reason may reject, with why it is right here."""

    files: str = Field(".*", description="Regex fully matched against the file's relative path ('.*': every file).")
    reason: str = Field(description="The reject reason it limits, e.g. 'bad_timestamp'.")
    share: float = Field(gt=0, le=1, description="The largest share of a file's raw value cells it may reject.")
    why: str = Field(min_length=1, description="Why this corpus may reject that much (required: a reader asks).")

    @field_validator("files")
    @classmethod
    def _compiles(cls, value: str) -> str:
        return _regex(value, "files")


class Cleaning(Grown):
    """Declared rules for invalid values; each rejected cell records the rule's reason."""

    ADDED = ("states", "reject_limits")

    missing_tokens: list[str] = Field(default=["", "NA"], description="Cell texts meaning 'no value' (missing).")
    sentinels: list[float] = Field(default=[], description="Values that mean 'no reading' (sentinel).")
    dropout_rows: bool = Field(
        False, description="Reject whole rows whose value cells all read 0 or are missing (dropout_row)."
    )
    zero_dropout_classes: list[str] = Field(
        default=[], description="Point classes for which a reading of exactly 0 is a dropout (zero_dropout)."
    )
    ranges: dict[str, tuple[float, float]] = Field(
        default={}, description="Point class -> inclusive plausible [min, max]; outside is out_of_range."
    )
    duplicates: Literal["keep_first_row", "keep_last_row", "reject_all"] = Field(
        "keep_first_row", description="Several valid values for one (stream, UTC time): which survives."
    )
    states: dict[str, float] = Field(
        default={},
        description="Cell texts of state points and the number each stands for (On = 1, Off = 0, Occupied = 1...), "
        "matched case-insensitively: a binary or enumerated point becomes a stream of these numbers.",
    )
    reject_limits: list[RejectLimit] = Field(
        default=[],
        description="[[cleaning.reject_limits]]: this corpus's limits over configs/ingest.toml's [reject_limits], the "
        "first entry matching a file and reason wins; each says why.",
    )

    @model_validator(mode="after")
    def _ranges_ordered(self) -> Cleaning:
        for cls_name, (low, high) in self.ranges.items():
            if not low <= high:
                raise ValueError(f"range for {cls_name} has min {low} > max {high}")
        return self


class CorpusMapping(Frozen):
    """Everything needed to turn data/raw/<name> into normalized tables."""

    name: CorpusName = Field(description="Corpus name; also its artifacts folder.")
    title: str = Field(description="One-line description shown in reports.")
    raw_dir: str | None = Field(None, description="Raw folder relative to the project root (default data/raw/<name>).")
    metadata: Metadata = Field(
        description="[metadata]: where sites, equipment and points come from (kind brick, table or inline)."
    )
    values: Values = Field(
        description="[values]: how the value files are laid out (kind wide_csv, long_csv, file_per_stream "
        "or bts_pickle)."
    )
    time: TimeSpec = Field(description="[time]: the time column and how it becomes UTC.")
    cleaning: Cleaning = Field(Cleaning(), description="[cleaning]: declared rules for invalid values.")
    held_out_sites: list[str] = Field(default=[], description="Site ids whose tasks go to the test split only.")
    split: SplitKind = Field(
        "auto",
        description="How rows are split: 'time' (time blocks with buffers), 'site' (whole sites per split, for a short "
        "corpus of many sites), 'group' (whole zones, rooms or stream groups per split, for one building) or 'auto' "
        "(time blocks when the span allows them, else sites, else groups when there are enough; docs/tasks.md states "
        "the minimums).",
    )
    splits: SplitOverrides | None = Field(
        None, description="[splits]: this corpus's own split settings over configs/families.toml [splits]."
    )
    raw_env: str | None = Field(
        None, description="Environment variable that may name the raw folder (data too large to ship)."
    )
    silence: list[Silence] = Field(
        default=[],
        # Left out of the mapping's dump when empty: a corpus without declarations keeps its identity hashes, and so
        # its release digest.
        exclude_if=lambda declared: not declared,
        description="[[silence]]: streams expected to be silent by design (a daily schedule, or night at the site), "
        "with the reason; coverage, gaps and quality thresholds then count only the expected hours.",
    )
    license: str = Field(
        "see SOURCE.md",
        description="License of the raw data: an SPDX identifier (CC-BY-4.0, ODbL-1.0, BSD-2-Clause...; "
        "configs/hub_licenses.toml [spdx]), alone or as the first word of the terms as the dataset card states them; "
        "other words need license_id.",
    )
    citation: str = Field("", description="How to credit the raw data (dataset card, Croissant citeAs).")
    license_id: str = Field(
        "",
        pattern=r"^$|^[A-Za-z0-9][A-Za-z0-9.+-]*$",
        description="SPDX identifier of the raw data's license, e.g. CC-BY-4.0: the dataset card's `license` in lower "
        "case when the Hugging Face Hub lists it (configs/hub_licenses.toml), else its license_name.",
    )
    license_url: str = Field(
        "",
        pattern=r"^$|^https?://\S+$|^TODO",
        description="Where the license text is, as an http(s) URL (the card's license_link when its license is not "
        "on the Hub's list, Croissant's license); a draft's TODO is refused by the build.",
    )

    @model_validator(mode="after")
    def _site_source(self) -> CorpusMapping:
        from_graph = isinstance(self.metadata, BrickMetadata)
        if isinstance(self.values, WideCsv):
            if from_graph and self.values.site is not None:
                raise ValueError(
                    "values.site must be absent with brick metadata: the graph's storedAt links give sites"
                )
            if not from_graph and self.values.site is None and self.values.site_column is None:
                raise ValueError(
                    "values.site is required: a template of the site key from file_pattern groups (or set "
                    "values.site_column, the column holding each row's site)"
                )
        elif isinstance(self.values, BtsPickle):
            if from_graph and not self.metadata.stream_id_predicate:
                raise ValueError(
                    "bts_pickle with brick metadata needs metadata.stream_id_predicate (the stream key literal)"
                )
        elif from_graph:
            raise ValueError(
                "brick metadata works with the wide_csv or bts_pickle layouts; use table or inline metadata otherwise"
            )
        if getattr(self.values, "site_column", None) is not None:
            if from_graph:
                raise ValueError(
                    "values.site_column cannot be combined with brick metadata (the graph gives sites); use table or "
                    "inline metadata, or drop site_column"
                )
            if self.values.site_column == self.time.column:
                raise ValueError(
                    f"values.site_column {self.values.site_column!r} is the time column; name the column that holds "
                    "the site keys"
                )
        if self.time.file_formats and isinstance(self.values, BtsPickle):
            raise ValueError(
                "time.file_formats applies to CSV layouts; bts_pickle timestamps are epoch numbers: remove it"
            )
        if self.cleaning.dropout_rows and not isinstance(self.values, WideCsv):
            raise ValueError("cleaning.dropout_rows applies to wide_csv rows only; remove it for this layout")
        return self
