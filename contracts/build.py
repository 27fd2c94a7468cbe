"""configs/build.toml: settings of the stages after ingest that enter their identity."""

from __future__ import annotations

from pydantic import Field, model_validator

from contracts.base import Frozen


class ThresholdQuantiles(Frozen):
    """Which corpus quantiles become the quality thresholds (recorded in the store)."""

    coverage_abstain: float = Field(
        0.10, ge=0, le=1, description="Weekly coverage below this quantile: abstain (low_coverage)."
    )
    coverage_answer: float = Field(
        0.75, ge=0, le=1, description="Weekly coverage at or above this quantile may answer."
    )
    gap_ratio_answer: float = Field(
        0.50, ge=0, le=1, description="Weekly gap ratio at or below this quantile may answer."
    )
    gap_ratio_abstain_window: float = Field(
        0.85, ge=0, le=1, description="Weekly gap ratio above this quantile: abstain (long_gap)."
    )
    gap_ratio_abstain_stream: float = Field(
        0.95, ge=0, le=1, description="Whole-stream gap ratio above this quantile: long_gap."
    )


class Bound(Frozen):
    """Limits a quality threshold is clamped into, so that a corpus's quantile cannot make a band absurd."""

    floor: float | None = Field(None, description="The threshold is at least this.")
    ceiling: float | None = Field(None, description="The threshold is at most this.")

    @model_validator(mode="after")
    def _ordered(self) -> Bound:
        if self.floor is not None and self.ceiling is not None and self.floor > self.ceiling:
            raise ValueError(f"floor {self.floor} is above ceiling {self.ceiling}")
        return self

    def clamp(self, value: float) -> float:
        if self.floor is not None:
            value = max(value, self.floor)
        return min(value, self.ceiling) if self.ceiling is not None else value


# thresholds that must stay ordered whatever the corpus: (lower, higher)
ORDERED_THRESHOLDS = (("coverage_abstain", "coverage_answer"), ("gap_ratio_answer", "gap_ratio_abstain_window"))


class ThresholdBounds(Frozen):
    """threshold = clamp(corpus quantile, floor, ceiling), per threshold (configs/build.toml)."""

    coverage_abstain: Bound = Bound()
    coverage_answer: Bound = Bound()
    gap_ratio_answer: Bound = Bound()
    gap_ratio_abstain_window: Bound = Bound()
    gap_ratio_abstain_stream: Bound = Bound()

    @model_validator(mode="after")
    def _keeps_order(self) -> ThresholdBounds:
        """Clamping keeps ordered quantiles ordered only when the bounds are ordered the same way."""
        for lower, higher in ORDERED_THRESHOLDS:
            for side in ("floor", "ceiling"):
                a, b = getattr(getattr(self, lower), side), getattr(getattr(self, higher), side)
                if (a is None) != (b is None) or (a is not None and a > b):
                    raise ValueError(f"{lower}.{side} must be declared with and at most {higher}.{side}")
        return self


class StoreConfig(Frozen):
    """How the tool store is computed from normalized tables."""

    std_ddof: int = Field(0, ge=0, le=1, description="Delta degrees of freedom of every std (0: population).")
    step_window: int = Field(12, ge=1, description="Gaps on each side whose median is an observation's local step.")
    preview_points: int = Field(96, ge=2, description="Evenly spaced samples per stream in previews.")
    thresholds: ThresholdQuantiles = ThresholdQuantiles()
    threshold_bounds: ThresholdBounds = ThresholdBounds()
    amount_units: dict[str, str] = Field(
        default_factory=dict,
        description="Unit codes of amounts (an energy, a volume, a mass: a meter's use per reading interval) -> the "
        "unit code of their rate per hour; a stream in one of them is a meter of amounts (docs/store.md).",
    )


class BuildConfig(Frozen):
    """The whole of configs/build.toml."""

    store: StoreConfig = StoreConfig()
