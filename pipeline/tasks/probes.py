"""Grid rules: what a guesser finds with an exact lookup at a probe rounded down, up or to nearest on a grid.

The SQL of the nearest family computes the same ({grid_us} in configs/families.toml); the lift uses this to place
revision probes out of the rules' reach, and the tests and the audit to measure how often a rule would win.
"""

from __future__ import annotations

MINUTE = 60_000_000


ROUNDINGS = ("down", "up", "nearest")


def grid_point(probe: int, minutes: int, rounding: str) -> int:
    """The instant one grid rule looks up for a probe (epoch us): the probe rounded down, up or to nearest."""
    g = minutes * MINUTE
    offset = {"down": 0, "up": g - 1, "nearest": g // 2}[rounding]
    return (probe + offset) // g * g


def grid_rules(grid_minutes: list[int]) -> list[tuple[int, str]]:
    """Every grid rule: (grid minutes, rounding)."""
    return [(minutes, rounding) for minutes in grid_minutes for rounding in ROUNDINGS]


def grid_points(probe: int, grid_minutes: list[int]) -> set[int]:
    """Every instant a grid rule looks up for a probe (epoch us)."""
    return {grid_point(probe, minutes, rounding) for minutes, rounding in grid_rules(grid_minutes)}


def grid_solvable(probe: int, nearest: int, grid_minutes: list[int]) -> bool:
    """Whether some grid rule's exact lookup lands on the nearest reading."""
    return nearest in grid_points(probe, grid_minutes)
