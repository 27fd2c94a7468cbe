"""BTS pickles are code: a restricted unpickler admits lists, strings and numpy arrays and dtypes only."""

from __future__ import annotations

import io
import pickle
from dataclasses import dataclass

import numpy as np

from pipeline.core.errors import UnsafePickle

# (module, name) the BTS format needs to rebuild numpy arrays; anything else is refused before it runs.
ALLOWED = {
    ("numpy", "ndarray"),
    ("numpy", "dtype"),
    ("_codecs", "encode"),
    *((f"numpy.{core}.multiarray", name) for core in ("core", "_core") for name in ("_reconstruct", "scalar")),
    *((f"numpy.{core}.numeric", "_frombuffer") for core in ("core", "_core")),
}


# Functions that allocate an array of a shape the pickle names: (module, name) -> (shape argument, dtype argument).
ALLOCATING = {(f"numpy.{core}.multiarray", "_reconstruct"): (1, 2) for core in ("core", "_core")}
EARLIEST_US, LATEST_US = -2_208_988_800_000_000, 7_258_118_400_000_000  # 1900-01-01 and 2200-01-01, UTC


def _requested_bytes(shape: object, dtype: object) -> int:
    """Bytes an array constructor would allocate, counted in Python integers (no overflow), before it runs."""
    dims = shape if isinstance(shape, tuple | list) else (shape,)
    count = 1
    for dim in dims:
        if not isinstance(dim, int | np.integer) or dim < 0:
            raise UnsafePickle(f"array shape {shape!r} is not a tuple of non-negative integers")
        count *= int(dim)
    try:
        itemsize = np.dtype(dtype).itemsize if dtype is not None else 8
    except TypeError as exc:
        raise UnsafePickle(f"array dtype {dtype!r} is not a numpy dtype") from exc
    return count * max(itemsize, 1)


class _Restricted(pickle.Unpickler):
    """Admits the globals numpy arrays need; no array constructor may ask for more bytes than the member holds."""

    def __init__(self, data: bytes) -> None:
        super().__init__(io.BytesIO(data))
        self.budget = budget = len(data)

        def __new__(cls: type, shape: object, dtype: object = float, *args: object, **kwargs: object) -> np.ndarray:
            _check(budget, "numpy.ndarray", shape, dtype)
            return np.ndarray.__new__(cls, shape, dtype, *args, **kwargs)

        # numpy.ndarray as the pickle sees it: the same class, whose direct construction is bounded
        self.ndarray = type("ndarray", (np.ndarray,), {"__new__": __new__, "__module__": "numpy"})

    def find_class(self, module: str, name: str):  # noqa: ANN201 (pickle's interface)
        if (module, name) not in ALLOWED:
            raise UnsafePickle(f"refused global {module}.{name}")
        if (module, name) == ("numpy", "ndarray"):
            return self.ndarray
        found = super().find_class(module, name)
        if (module, name) not in ALLOCATING:
            return found
        shape_at, dtype_at = ALLOCATING[(module, name)]

        def bounded(*args: object) -> object:
            _check(
                self.budget,
                f"{module}.{name}",
                args[shape_at] if len(args) > shape_at else (),
                args[dtype_at] if len(args) > dtype_at else float,
            )
            return found(*args)

        return bounded


def _check(budget: int, what: str, shape: object, dtype: object) -> None:
    wanted = _requested_bytes(shape, dtype)
    if wanted > budget:
        raise UnsafePickle(f"{what} asks for an array of {wanted:,} bytes in a member of {budget:,} bytes")


@dataclass(frozen=True)
class Series:
    stream_id: str
    timestamps_us: np.ndarray  # int64 microseconds UTC (0 where not valid_ts)
    values: np.ndarray  # float64
    valid_ts: (
        np.ndarray
    )  # bool: the timestamp is finite and within 1900..2200 (else its cell is a bad_timestamp reject)


def _microseconds(timestamps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(int64 microseconds, valid): NaN, NaT, infinities and times outside 1900..2200 are not valid."""
    if np.issubdtype(timestamps.dtype, np.datetime64):
        us = timestamps.astype("datetime64[us]")
        valid = ~np.isnat(us)
        raw = us.astype(np.int64)
    elif np.issubdtype(timestamps.dtype, np.integer) or np.issubdtype(timestamps.dtype, np.floating):  # epoch seconds
        seconds = timestamps.astype(np.float64)
        valid = np.isfinite(seconds) & (seconds >= EARLIEST_US / 1e6) & (seconds <= LATEST_US / 1e6)
        raw = np.rint(np.where(valid, seconds, 0.0) * 1_000_000).astype(np.int64)
    else:
        raise ValueError(f"timestamps of dtype {timestamps.dtype} are neither datetime64 nor epoch seconds")
    valid &= (raw >= EARLIEST_US) & (raw <= LATEST_US)
    return np.where(valid, raw, 0), valid


def _real_values(values: np.ndarray) -> np.ndarray:
    """float64 values; complex, object or text arrays are refused (nothing is dropped or coerced silently)."""
    if values.dtype.kind == "c":
        raise ValueError("values are complex numbers; only real values can be read (the imaginary part would be lost)")
    if values.dtype.kind not in "fiub":
        raise ValueError(
            f"values of dtype {values.dtype} are not numbers (e.g. Python objects); only numeric arrays are read"
        )
    return values.astype(np.float64)


def load_series(data: bytes, max_bytes: int) -> Series:
    """[StreamID, timestamps, values] from one member; raises UnsafePickle or ValueError (with the reason)."""
    if len(data) > max_bytes:
        raise ValueError(f"member is {len(data):,} bytes, over the declared limit of {max_bytes:,}")
    try:
        obj = _Restricted(data).load()
    except UnsafePickle:
        raise
    except Exception as exc:  # a truncated or corrupt pickle can fail in many ways; none may escape
        raise ValueError(f"corrupt pickle ({type(exc).__name__}: {exc})") from None
    if not (
        isinstance(obj, list)
        and len(obj) == 3
        and isinstance(obj[0], str)
        and all(isinstance(x, np.ndarray) and x.ndim == 1 for x in obj[1:])
        and len(obj[1]) == len(obj[2])
    ):
        raise ValueError("not a list [StreamID, timestamps (1-D array), values (1-D array of the same length)]")
    timestamps, valid = _microseconds(np.asarray(obj[1]))
    return Series(stream_id=obj[0], timestamps_us=timestamps, values=_real_values(np.asarray(obj[2])), valid_ts=valid)
