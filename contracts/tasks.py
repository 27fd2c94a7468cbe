"""Static task families (configs/families.toml) and the static tasks they compile to."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from contracts.answers import AnswerForm, Tolerance
from contracts.base import Frozen
from contracts.splits import SPLITS, Split


class CallTemplate(Frozen):
    """One tool call of a family's call set. "{slot}" strings take slot values; "$id.path" strings are references."""

    id: str = Field(pattern=r"^[a-z][a-z0-9_]*$", description="Call id that later references use ($id.field).")
    tool: str = Field(description="Registry tool name.")
    arguments: dict[str, Any] = Field(description="Argument templates.")
    for_each: str | None = Field(
        None, description="List slot to expand over: one call per item, ids id1, id2, ...; '{item.x}' reads the item."
    )


class GoldField(Frozen):
    """Where a gold answer field comes from: a reference into the call outputs, optionally mapped."""

    ref: str = Field(description="Reference such as '$c2.value'.")
    map: dict[str, Any] | None = Field(None, description="Value -> gold value (e.g. quality band -> decision).")


class CallSet(Frozen):
    """A sequence of calls and how the gold answer is read from their outputs."""

    calls: list[CallTemplate]
    gold: dict[str, GoldField]

    @model_validator(mode="after")
    def _unique_ids(self) -> CallSet:
        ids = [c.id for c in self.calls]
        if len(ids) != len(set(ids)):
            raise ValueError(f"duplicate call ids {ids}")
        return self


class Predicate(Frozen):
    """A named eligibility condition, an SQL boolean over the candidate pool's columns.

    '{previous}' stands for the conjunction of the predicates before it; '{name}' for a threshold."""

    name: str
    sql: str


class Nearest(Frozen):
    """The table `nearest` a candidate query may read (pipeline/tasks/nearest.py): for each instant, the row nearest
    to it in time, found by one streamed pass over rows in the store's order and a binary search per instant."""

    rows: str = Field(
        description="SQL giving stream_id, ts (epoch us), the match columns and any others, each stream's rows "
        "together and in time order (observations or observation_pairs() read unsorted)."
    )
    instants: str = Field(
        description="SQL giving the match columns, target (the instant) and its bounds lo <= ts < hi (epoch us), and "
        "any others; `nearest` has these columns and the nearest row's other columns, for each instant with a row."
    )
    match: list[str] = Field(
        default=["stream_id"],
        description="Columns a row and an instant must share (stream_id first), e.g. a kind of row.",
    )

    @model_validator(mode="after")
    def _stream_first(self) -> Nearest:
        if not self.match or self.match[0] != "stream_id" or len(set(self.match)) != len(self.match):
            raise ValueError(f"nearest.match must start with stream_id and name each column once, not {self.match}")
        return self


Period = Literal["day", "week", "month", "relative", "instant", "none"]
Category = Literal["Knowledge Query", "Data Query", "Inference Query", "Decision Support"]
TargetShape = Literal["single", "pair", "members"]
PERIOD_DAYS = {"day": 1, "week": 7, "month": 31, "relative": 1, "instant": 0, "none": 0}
# The slot that says a window of each windowed period (what the user replies when the time is withheld); only these
# periods have a previous and next window to revise to.
WINDOW_SLOT = {"relative": "anchor_iso", "week": "week_start", "month": "month_name", "day": "day"}


SplitKind = Literal["auto", "time", "site", "group"]


class SplitRule(Frozen):
    """Splits without memory (design/VALIDITY.md §3), by one of two plans. time: the corpus's time is cut into one
    block per split, in `order`, each holding about its share of the corpus's stream-weeks, with buffers between
    blocks; a row goes to the block that holds its whole reach (its windows widened by one window, for revisions, and
    by `reach_days`, for the commitment). site: whole sites go to the splits, each about its share of the
    stream-weeks, every split over the corpus's whole time. group: as site, with the zones, rooms or stream groups
    of the sites in place of whole sites. Held-out sites only ever appear in test; a corpus with fewer than 2 sites
    splits by time alone. pipeline/tasks/fit.py chooses the plan and the families that fit."""

    order: list[Split] = Field(min_length=3, max_length=3, description="The splits' blocks in time order.")
    shares: dict[Split, float] = Field(
        description="Each split's share of the corpus's stream-weeks (buffers excluded)."
    )
    buffer_days: int = Field(
        gt=0, description="Days between consecutive blocks: at least the longest window + 2 x reach_days."
    )
    reach_days: int = Field(
        ge=0, description="How far a conversation reaches beyond its windows (commitments: 14 days, a week long)."
    )
    min_sites: int = Field(
        5,
        ge=3,
        description="A site split needs at least this many sites, a group split this many zones, rooms or stream "
        "groups (each split gets one or more).",
    )
    min_windows_in_span: int = Field(
        3,
        ge=1,
        description="A family fits a corpus whose span holds at least this many of its windows (one asked about and "
        "one on each side to revise to); a family that does not fit is left out with a note.",
    )
    short_min_days: int = Field(
        28,
        ge=7,
        description="A time plan over a span too short for its buffers in whole weeks (a short time plan: blocks and "
        "buffers in days, scaled to the span) needs at least this many days of data.",
    )
    short_buffer_share: float = Field(
        0.07,
        gt=0,
        lt=0.25,
        description="A short time plan's buffer between blocks: this share of the span's days (at least one day); "
        "reach_days shrinks by the same factor as buffer_days.",
    )

    def with_overrides(self, overrides: SplitOverrides | None) -> SplitRule:
        """This rule with a corpus mapping's [splits] settings in place of the defaults (validated again)."""
        if overrides is None:
            return self
        changed = overrides.model_dump(exclude_none=True)
        return SplitRule.model_validate({**self.model_dump(), **changed}) if changed else self

    @model_validator(mode="after")
    def _consistent(self) -> SplitRule:
        if sorted(self.order) != sorted(SPLITS) or set(self.shares) != set(SPLITS):
            raise ValueError(f"order and shares must name each of {', '.join(SPLITS)} once")
        if abs(sum(self.shares.values()) - 1) > 1e-9 or min(self.shares.values()) <= 0:
            raise ValueError("shares must be positive and sum to 1")
        if self.buffer_days < max(PERIOD_DAYS.values()) + 2 * self.reach_days:
            raise ValueError(
                f"buffer_days must be at least the longest window ({max(PERIOD_DAYS.values())} days) + 2 x reach_days"
            )
        return self


class SplitOverrides(Frozen):
    """A corpus's own split settings ([splits] in configs/corpora/<name>.toml); what it leaves out comes from
    configs/families.toml [splits]."""

    shares: dict[Split, float] | None = Field(None, description="Each split's share of the stream-weeks.")
    buffer_days: int | None = Field(
        None, gt=0, description="Days between time blocks when the longest window (31 days) fits the corpus."
    )
    reach_days: int | None = Field(None, ge=0, description="How far a conversation reaches beyond its windows.")
    min_sites: int | None = Field(None, ge=3, description="Sites a site split needs at least.")
    min_windows_in_span: int | None = Field(None, ge=1, description="Windows of a family the span must hold.")


class Family(Frozen):
    """One static task family, declared as data."""

    description: str
    definition: str = Field(
        min_length=20,
        description="What the gold means, in one sentence a building engineer accepts (e.g. 'the mean of the readings "
        "whose time is inside the window'); docs/tasks.md lists them and tests/test_gold_second_route.py derives every "
        "released gold again from data/raw by it.",
    )
    category: Category = Field(
        description="The ground-truth category its trajectories carry (the seed's export format): "
        "Knowledge Query (metadata), Data Query (one stream's values), Inference Query "
        "(comparing streams) or Decision Support (a quality decision). Declared by every family."
    )
    target_shape: TargetShape = Field(
        "single",
        description="How the streams a question names become the call slots: single "
        "(site_id, equipment), pair (left_/right_site_id, left_/right_equipment) or members "
        "(a list of {stream_id, site_id, equipment}); the shortcut policies rebuild the calls so.",
    )
    commit_stream: str | None = Field(
        None,
        description="The gold field naming the stream the commitment asks about (e.g. "
        "the top of a ranking); none: the task's first evidence stream.",
    )
    period: Period = Field(
        description="The window the family asks about (a revision moves it by one): day, week, month, "
        "relative (24 hours up to an instant), instant (a reading) or none."
    )
    time_columns: list[str] = Field(
        default=[],
        description="Candidate columns (epoch us) spanning the row's windows or instants; "
        "empty: the row has no time (it goes to a split by its sites).",
    )
    scope: Literal["site", "corpus", "site_or_corpus"] = Field("site", description="Where candidates come from.")
    candidates: str = Field(description="SQL over the store returning the candidate pool (one row per candidate).")
    nearest: Nearest | None = Field(
        None, description="The table `nearest` the candidate query reads: each instant's nearest row (optional)."
    )
    predicates: list[Predicate] = Field(
        description="Eligibility, applied in order; the manifest counts survivors of each."
    )
    key: list[str] = Field(
        min_length=1, description="Columns identifying a candidate (hashed for the selection order)."
    )
    sites_column: str = Field("sites", description="List column of the sites a candidate touches (held-out -> test).")
    streams_column: str = Field(
        "streams", description="List column of the streams a candidate touches (evidence, provenance)."
    )
    canonical: CallSet
    alternatives: list[CallSet] = Field(default=[], description="Other call sets that reach the same gold.")
    distinct_from: CallSet | None = Field(
        None,
        description="A call set whose answer must differ from the gold under the "
        "verifier (e.g. the calendar day's mean for a 24-hour window): candidates where it "
        "does not are skipped, so the family never computes another family's answer.",
    )
    answer_fields: list[str] = Field(
        min_length=1, description="Fields the agent's answer must hold (configs/answers.toml names their types)."
    )
    tolerances: dict[str, Tolerance] = Field(
        default={}, description="Numeric field -> {abs, rel}, overriding the field's tolerance in configs/answers.toml."
    )
    balance_key: list[str] = Field(description="Columns whose combination is capped per split.")
    cap_fraction: float = Field(
        0.25, gt=0, le=1, description="At most this share of a split's target per balance key value."
    )
    cap_per_stream: int = Field(3, ge=1, description="At most this many tasks of the family per stream per split.")
    share_caps: dict[str, float] = Field(
        default={},
        description="Boolean candidate column -> the largest share of a split's "
        "selected tasks it may be true for, held at every point of the selection order.",
    )
    templates: list[str] = Field(
        min_length=1, description="Query texts with {slot} fields to fill; one chosen by hash."
    )
    difficulty: dict[str, int] = Field(
        default={}, description="Declared difficulty proxies (temporal_normalizations, graph_hops, aggregations)."
    )
    targets: dict[str, int] | None = Field(None, description="Per-split targets overriding the defaults.")

    def target(self, defaults: dict[str, int], split: str) -> int:
        """Episodes to release for a split."""
        return {**defaults, **(self.targets or {})}.get(split, 0)

    @model_validator(mode="after")
    def _fields_consistent(self) -> Family:
        golds = set(self.canonical.gold)
        missing = [f for f in self.answer_fields if f not in golds]
        if missing:
            raise ValueError(f"answer_fields {missing} have no gold in canonical.gold")
        unknown = [f for f in self.tolerances if f not in self.answer_fields]
        if unknown:
            raise ValueError(f"tolerances name {unknown}, not answer fields")
        if self.commit_stream is not None and self.commit_stream not in golds:
            raise ValueError(
                f"commit_stream {self.commit_stream!r} is not a field of canonical.gold ({', '.join(sorted(golds))})"
            )
        for alternative in [*self.alternatives, *([self.distinct_from] if self.distinct_from else [])]:
            if set(alternative.gold) != golds:
                raise ValueError("every alternative must give the same gold fields as the canonical call set")
        return self


class FamiliesConfig(Frozen):
    """The whole of configs/families.toml."""

    seed: str = Field(description="Seed of every selection hash; change it to draw another benchmark.")
    targets: dict[Split, int] = Field(description="Default episodes per family per split.")
    oversupply: float = Field(
        4.0,
        ge=1,
        description="The tasks stage selects targets x oversupply tasks per family and split; "
        "the episodes stage keeps the first `targets` that lift (some commitment "
        "outcomes are not found near every conversation).",
    )
    splits: SplitRule
    grid_minutes: list[int] = Field(
        description="The grids (minutes) of the grid rules that stand in for a nearest lookup: an exact "
        "lookup at the probe rounded down, up or to nearest on each. In SQL: {grid_us}."
    )
    families: dict[str, Family]


class Call(Frozen):
    """One concrete tool call of a task."""

    id: str
    tool: str
    arguments: dict[str, Any]


class Task(Frozen):
    """A static task: a question whose gold answer and evidence come from the tools."""

    task_id: str
    corpus: str
    family: str
    split: Split
    query: str = Field(description="The question as an operator would ask it.")
    template: int = Field(description="Index of the query template used.")
    slots: dict[str, Any] = Field(description="Values the query and calls were rendered from.")
    canonical_calls: list[Call]
    alternative_calls: list[list[Call]]
    gold: dict[str, Any]
    verifier: AnswerForm = Field(description="The question's answer form: what is asked for and how it is graded.")
    evidence_stream_ids: list[str]
    site_ids: list[str]
    difficulty: dict[str, int]
    provenance: dict[str, Any] = Field(description="Raw files with sha256, stream ids, window or timestamp keys.")
    selection_key: str = Field(description="xxh3-128 of seed, family and candidate identity: the selection order.")
    time_block: list[int] = Field(
        min_length=2,
        max_length=2,
        description="[start, end) in epoch us of the split's time block: "
        "everything the conversation touches stays inside.",
    )
