"""BTS pickles are code: a restricted unpickler admits lists, strings and numpy arrays and dtypes only."""

from __future__ import annotations

import io
import pickle
from dataclasses import dataclass

import numpy as np

# (module, name) the BTS format needs to rebuild numpy arrays; anything else is refused before it runs.
ALLOWED = {
    ("numpy", "ndarray"), ("numpy", "dtype"), ("_codecs", "encode"),
    *((f"numpy.{core}.multiarray", name) for core in ("core", "_core") for name in ("_reconstruct", "scalar")),
    *((f"numpy.{core}.numeric", "_frombuffer") for core in ("core", "_core")),
}


class UnsafePickle(pickle.UnpicklingError):
    """A pickle that asks for something other than numpy arrays (e.g. os.system through __reduce__)."""


class _Restricted(pickle.Unpickler):
    def find_class(self, module: str, name: str):  # noqa: ANN201 (pickle's interface)
        if (module, name) not in ALLOWED:
            raise UnsafePickle(f"refused global {module}.{name}")
        return super().find_class(module, name)


@dataclass(frozen=True)
class Series:
    stream_id: str
    timestamps_us: np.ndarray  # int64 microseconds UTC
    values: np.ndarray  # float64


def _microseconds(timestamps: np.ndarray) -> np.ndarray:
    if np.issubdtype(timestamps.dtype, np.datetime64):
        return timestamps.astype("datetime64[us]").astype(np.int64)
    if np.issubdtype(timestamps.dtype, np.number):  # epoch seconds
        return np.rint(timestamps.astype(np.float64) * 1_000_000).astype(np.int64)
    raise ValueError(f"timestamps of dtype {timestamps.dtype} are neither datetime64 nor epoch seconds")


def load_series(data: bytes, max_bytes: int) -> Series:
    """[StreamID, timestamps, values] from one member; raises UnsafePickle or ValueError (with the reason)."""
    if len(data) > max_bytes:
        raise ValueError(f"member is {len(data):,} bytes, over the declared limit of {max_bytes:,}")
    try:
        obj = _Restricted(io.BytesIO(data)).load()
    except UnsafePickle:
        raise
    except Exception as exc:  # a truncated or corrupt pickle can fail in many ways; none may escape
        raise ValueError(f"corrupt pickle ({type(exc).__name__}: {exc})") from None
    if not (isinstance(obj, list) and len(obj) == 3 and isinstance(obj[0], str)
            and all(isinstance(x, np.ndarray) and x.ndim == 1 for x in obj[1:]) and len(obj[1]) == len(obj[2])):
        raise ValueError("not a list [StreamID, timestamps (1-D array), values (1-D array of the same length)]")
    return Series(stream_id=obj[0], timestamps_us=_microseconds(obj[1]), values=obj[2].astype(np.float64))
