"""The split names, apart from the task contracts: the command line offers them without loading pydantic."""

from __future__ import annotations

from typing import Literal, get_args

Split = Literal["train", "dev", "test"]
SPLITS: tuple[str, ...] = get_args(Split)
