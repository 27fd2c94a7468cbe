"""The faults a synthetic generator injects (configs/synth.toml holds the defaults, measured on the shipped corpora)."""

from __future__ import annotations

from pydantic import Field

from contracts.base import Frozen

Rate = Field(ge=0.0, lt=1.0)


class FaultRates(Frozen):
    """Each fault's rate in [0, 1); a share of one stream's regular readings unless said otherwise. docs/bts.md
    gives the measured rate behind each default and how `synth bts` places each fault."""

    dropout: float = Rate  # readings lost one by one (isolated dropouts)
    long_gaps: float = Rate  # share of a stream's time lost in gaps of 1 to 14 days
    stuck: float = Rate  # readings frozen at the value before them, in runs of 6 hours to 3 days
    spikes: float = Rate  # readings pushed 6 to 20 standard deviations off, for one reading
    out_of_range: float = Rate  # readings of temperature streams replaced by a physically impossible value
    clock_jumps: float = Rate  # readings after which the clock steps one hour forward or back, for good
    duplicates: float = Rate  # readings written twice with the same timestamp
    counter_resets: float = Rate  # readings of counter streams (energy) at which the counter restarts from 0


class SynthConfig(Frozen):
    """configs/synth.toml."""

    faults: FaultRates
