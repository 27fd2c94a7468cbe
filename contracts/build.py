"""configs/build.toml: settings of the stages after ingest that enter their identity."""

from __future__ import annotations

from pydantic import Field

from contracts.base import Frozen


class ThresholdQuantiles(Frozen):
    """Which corpus quantiles become the quality thresholds (recorded in the store)."""

    coverage_abstain: float = Field(0.10, ge=0, le=1, description="Weekly coverage below this quantile: abstain (low_coverage).")
    coverage_answer: float = Field(0.75, ge=0, le=1, description="Weekly coverage at or above this quantile may answer.")
    gap_ratio_answer: float = Field(0.50, ge=0, le=1, description="Weekly gap ratio at or below this quantile may answer.")
    gap_ratio_abstain_window: float = Field(0.85, ge=0, le=1, description="Weekly gap ratio above this quantile: abstain (long_gap).")
    gap_ratio_abstain_stream: float = Field(0.95, ge=0, le=1, description="Whole-stream gap ratio above this quantile: long_gap.")


class StoreConfig(Frozen):
    """How the tool store is computed from normalized tables."""

    std_ddof: int = Field(0, ge=0, le=1, description="Delta degrees of freedom of every std (0: population).")
    step_window: int = Field(12, ge=1, description="Gaps on each side whose median is an observation's local step.")
    preview_points: int = Field(96, ge=2, description="Evenly spaced samples per stream in previews.")
    thresholds: ThresholdQuantiles = ThresholdQuantiles()


class BuildConfig(Frozen):
    """The whole of configs/build.toml."""

    store: StoreConfig = StoreConfig()
