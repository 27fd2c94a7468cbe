"""Grid rules: what a guesser finds with an exact lookup at a probe rounded down, up or to nearest on a grid.

The SQL of the nearest family computes the same ({grid_us} in configs/families.toml); the lift uses this to place
revision probes out of the rules' reach, and the tests and the audit to measure how often a rule would win.
"""

from __future__ import annotations

MINUTE = 60_000_000


def grid_points(probe: int, grid_minutes: list[int]) -> set[int]:
    """Every instant a grid rule looks up for a probe (epoch us)."""
    points = set()
    for minutes in grid_minutes:
        g = minutes * MINUTE
        points |= {probe // g * g, (probe + g - 1) // g * g, (probe + g // 2) // g * g}
    return points


def grid_solvable(probe: int, nearest: int, grid_minutes: list[int]) -> bool:
    """Whether some grid rule's exact lookup lands on the nearest reading."""
    return nearest in grid_points(probe, grid_minutes)
