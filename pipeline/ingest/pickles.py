"""BTS pickles are code: a restricted unpickler admits lists, strings and numpy arrays and dtypes only, and what a
member allocates in all is bounded before it is allocated (docs/bts.md)."""

from __future__ import annotations

import functools
import io
import pickle
import pickletools
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from pipeline.core.canonical import check_text
from pipeline.core.errors import UnsafePickle

# (module, name) the BTS format needs to rebuild numpy arrays; anything else is refused before it runs.
ALLOWED = {
    ("numpy", "ndarray"),
    ("numpy", "dtype"),
    ("_codecs", "encode"),
    *((module, "bytes") for module in ("__builtin__", "builtins")),  # b"" in protocol 2 (an empty array's data)
    *((f"numpy.{core}.multiarray", name) for core in ("core", "_core") for name in ("_reconstruct", "scalar")),
    *((f"numpy.{core}.numeric", "_frombuffer") for core in ("core", "_core")),
}
EARLIEST_US, LATEST_US = -2_208_988_800_000_000, 7_258_118_400_000_000  # 1900-01-01 and 2200-01-01, UTC

# What reading one member may allocate in all, counted before each allocation: ALLOCATION_FACTOR times the member's
# size plus ALLOCATION_FLOOR (the planner's working set of pickles, ingest's EXPANSION, is ~10 bytes per raw byte too).
# A plain member of 64-bit arrays is counted at 4 to 6 times its size (its text or bytes, the arrays, their conversion;
# the peak is ~2.6 times); a member that asks for more (text encoded again and again, arrays rebuilt from one growing
# list, a memo of a billion slots) is refused before it gets it.
ALLOCATION_FACTOR = 10
ALLOCATION_FLOOR = 1 << 20
# The unpickler's own objects, per opcode beside its argument's bytes: the object it pushes (a list, a set, a dict
# entry, an int), a stack and a memo slot. The largest (an empty set) is 216 bytes.
PER_OPCODE = 512
# Bytes per value of the series made from the arrays: int64 microseconds, float64 values, validity, a temporary.
CONVERSION_PER_VALUE = 32
# The encodings numpy's pickles use to carry bytes as text (protocol 2); any other codec is refused.
LATIN1 = frozenset({"latin1", "latin-1", "iso-8859-1"})


class _Budget:
    """The bytes a member may still allocate; every allowed constructor charges what it is about to allocate."""

    def __init__(self, size: int) -> None:
        self.limit, self.used = ALLOCATION_FACTOR * size + ALLOCATION_FLOOR, 0

    def charge(self, what: str, nbytes: int) -> None:
        if self.used + nbytes > self.limit:
            asks = f"more than {self.limit:,}" if nbytes > self.limit else f"{nbytes:,}"
            raise UnsafePickle(
                f"{what} asks for {asks} bytes, more than the {self.limit - self.used:,} left of the member's bound "
                f"of {self.limit:,} ({ALLOCATION_FACTOR} times its size + {ALLOCATION_FLOOR:,})"
            )
        self.used += nbytes


_OPCODES = {op.code.encode("latin-1"): op for op in pickletools.opcodes}
_LENGTH_PREFIX = {
    pickletools.TAKEN_FROM_ARGUMENT1: (1, False),
    pickletools.TAKEN_FROM_ARGUMENT4: (4, True),
    pickletools.TAKEN_FROM_ARGUMENT4U: (4, False),
    pickletools.TAKEN_FROM_ARGUMENT8U: (8, False),
}
_MEMO_PUTS = {"PUT", "BINPUT", "LONG_BINPUT"}


def _argument_end(data: bytes, at: int, op: pickletools.OpcodeInfo) -> int:
    """Where the argument of `op` (starting at `at`) ends, read from its length or its end of line, never decoded."""
    arg = op.arg
    if arg is None:
        return at
    if arg.n >= 0:
        return at + arg.n
    if arg.n == pickletools.UP_TO_NEWLINE:
        for _ in range(2 if arg.name == "stringnl_noescape_pair" else 1):
            end = data.find(b"\n", at)
            if end < 0:
                raise ValueError(f"corrupt pickle ({op.name} at {at - 1} has no end of line)")
            at = end + 1
        return at
    width, signed = _LENGTH_PREFIX[arg.n]
    length = int.from_bytes(data[at : at + width], "little", signed=signed)
    if not 0 <= at + width + length <= len(data):  # pickle would allocate the length it declares before reading
        raise ValueError(f"corrupt pickle ({op.name} at {at - 1} declares {length:,} bytes, {len(data) - at:,} follow)")
    return at + width + length


def _scan(data: bytes, budget: _Budget) -> None:
    """Walk the opcodes before any runs: charge the unpickler's own objects (PER_OPCODE each, plus the argument's
    bytes) and refuse a memo index beyond the opcodes so far (pickle would size its memo to it: 9 bytes could ask for
    gigabytes). The walk reads the bytes as pickle does only if no opcode runs past the end of a frame (pickle then
    drops the frame's rest and reads on elsewhere), so such a pickle is refused, as pickle's Python reader does."""
    at, count, frame_end = 0, 0, None
    while at < len(data):
        op = _OPCODES.get(data[at : at + 1])
        if op is None:
            raise ValueError(f"corrupt pickle (byte {data[at]:#04x} at {at} is not an opcode)")
        start = at + 1
        at, count = _argument_end(data, start, op), count + 1
        if frame_end is not None and (at > frame_end or op.name == "FRAME"):
            raise ValueError(f"corrupt pickle ({op.name} at {start - 1} runs past the end of its frame)")
        frame_end = None if at == frame_end else frame_end
        if op.name == "FRAME":
            frame_end = at + int.from_bytes(data[start:at], "little")
            if frame_end > len(data):
                raise ValueError(f"corrupt pickle (FRAME at {start - 1} is longer than the bytes that follow)")
        if op.name in _MEMO_PUTS:
            _check_memo(op.name, data[start:at], start - 1, count)
        budget.charge(f"opcode {op.name} at {start - 1}", PER_OPCODE + at - start)
        if op.name == "STOP":
            return


def _check_memo(name: str, raw: bytes, at: int, count: int) -> None:
    try:
        index = int(raw.strip()) if name == "PUT" else int.from_bytes(raw, "little")
    except ValueError:
        raise ValueError(f"corrupt pickle (PUT at {at} names no memo slot)") from None
    if index > count:
        raise UnsafePickle(f"{name} at {at} names memo slot {index:,} after {count:,} opcodes")


def _plain_dtype(dtype: object) -> np.dtype:
    """The dtype an array constructor is given, if it is one numpy would make from its own name: a pickle may set a
    dtype's state (BUILD) to any size and flags, e.g. a float64 that says it holds Python objects. Structured and
    subarray dtypes (never in a BTS member) are refused too."""
    try:
        found = np.dtype(dtype)
    except (TypeError, ValueError) as exc:
        raise UnsafePickle(f"array dtype {dtype!r:.200} is not a numpy dtype") from exc
    if found.fields is not None or found.subdtype is not None:
        raise UnsafePickle(f"array dtype {found!r:.200} is structured; only plain dtypes are admitted")
    fresh = np.dtype(found.str)
    if (found.itemsize, found.alignment, found.flags) != (
        fresh.itemsize,
        fresh.alignment,
        fresh.flags,
    ) or found != fresh:
        raise UnsafePickle(
            f"array dtype {found.str!r} has a state no {fresh.str!r} has (itemsize {found.itemsize}, flags "
            f"{found.flags}); only dtypes as numpy makes them are admitted"
        )
    return found


def _requested_bytes(shape: object, dtype: object, budget: int) -> int:
    """Bytes an array constructor would allocate, counted in Python integers before it runs; any count over `budget`
    is returned as budget + 1 (the product of a hostile shape is never computed in full)."""
    dims = shape if isinstance(shape, tuple | list) else (shape,)
    if not all(isinstance(dim, int | np.integer) and dim >= 0 for dim in dims):
        raise UnsafePickle(f"array shape {shape!r:.200} is not a tuple of non-negative integers")
    count = max(_plain_dtype(dtype).itemsize, 1)
    if 0 in dims:
        return 0
    for dim in dims:
        count *= int(dim)
        if count > budget:
            return budget + 1
    return count


_BYTE_ORDERS = frozenset("<>|=")


def _check_dtype_state(state: object) -> None:
    """A dtype's state (BUILD) as numpy writes it for a plain dtype: (3, order, None, None, None, size, alignment,
    flags), and for datetimes (4, ..., (None, (unit, count, 1, 1))). numpy's own reader trusts the state's shape, and
    crashes the process on some others (numpy 2.4: (3, '<', None, -1, -1, 0)); the values are checked by
    _plain_dtype where the dtype is used."""
    ints = (int, np.integer)
    plain = (
        isinstance(state, tuple)
        and len(state) in (8, 9)
        and state[0] == len(state) - 5
        and state[1] in _BYTE_ORDERS
        and state[2:5] == (None, None, None)
        and all(isinstance(x, ints) and not isinstance(x, bool) and -1 <= x < 1 << 31 for x in state[5:8])
    )
    if plain and len(state) == 9:
        extra = state[8]
        plain = (
            isinstance(extra, tuple)
            and len(extra) == 2
            and extra[0] is None
            and isinstance(extra[1], tuple)
            and len(extra[1]) == 4
            and isinstance(extra[1][0], bytes | str)
            and all(isinstance(x, ints) and not isinstance(x, bool) and 0 <= x < 1 << 31 for x in extra[1][1:])
        )
    if not plain:
        raise UnsafePickle(f"a dtype's state {state!r:.200} is not one numpy writes for a plain dtype")


class _Restricted(pickle._Unpickler):  # noqa: SLF001 (pickle's Python reader: its BUILD can be checked, see load_build)
    """Admits the globals numpy arrays need; every one that allocates charges the member's budget first. The Python
    reader of the pickle module, not its C one: BUILD is checked before numpy gets a state, and its memo is a dict."""

    def __init__(self, data: bytes, budget: _Budget) -> None:
        super().__init__(io.BytesIO(data))
        self.budget = budget

        def charge_array(what: str, shape: object, dtype: object) -> None:
            budget.charge(what, _requested_bytes(shape, dtype, budget.limit))

        def __new__(cls: type, shape: object, dtype: object = float, *args: object, **kwargs: object) -> np.ndarray:
            charge_array("numpy.ndarray", shape, dtype)
            return np.ndarray.__new__(cls, shape, dtype, *args, **kwargs)

        def __setstate__(self: np.ndarray, state: object) -> None:
            # (version, shape, dtype, fortran, data) or (shape, dtype, fortran, data): an object array's data is a
            # list of as many items, a pointer each (its itemsize), so an array rebuilt from a growing list is counted
            if not (isinstance(state, tuple) and len(state) in (4, 5)):
                raise UnsafePickle(f"an array's state is {type(state).__name__}, not numpy's 4 or 5 items")
            shape, dtype, data = state[-4], state[-3], state[-1]
            nbytes = _requested_bytes(shape, dtype, budget.limit)
            budget.charge("an array's state", nbytes)
            items = nbytes // np.dtype(dtype).itemsize if nbytes else 0
            if np.dtype(dtype).hasobject and not (isinstance(data, list) and len(data) == items):
                # numpy reads as many items as the shape says, past the end of a shorter list (a crash)
                raise UnsafePickle(f"an object array of {items:,} items has {type(data).__name__} data of other length")
            np.ndarray.__setstate__(self, state)

        # numpy.ndarray as the pickle sees it: the same class, whose construction and state are charged
        self.ndarray = type(
            "ndarray", (np.ndarray,), {"__new__": __new__, "__setstate__": __setstate__, "__module__": "numpy"}
        )

    def load_build(self) -> None:
        """BUILD of an array (its state charged, see ndarray) or of a dtype (its state checked); of nothing else."""
        state, target = self.stack[-1], self.stack[-2]
        if isinstance(target, np.dtype):
            _check_dtype_state(state)
        elif not isinstance(target, self.ndarray):
            raise UnsafePickle(f"BUILD of a {type(target).__name__} is not admitted")
        super().load_build()

    dispatch = {**pickle._Unpickler.dispatch, pickle.BUILD[0]: load_build}  # noqa: SLF001

    def find_class(self, module: str, name: str):  # noqa: ANN201 (pickle's interface)
        if (module, name) not in ALLOWED:
            raise UnsafePickle(f"refused global {module}.{name}")
        if (module, name) == ("numpy", "ndarray"):
            return self.ndarray
        found = super().find_class(module, name)
        charged = {"_reconstruct": self._reconstruct, "_frombuffer": self._frombuffer, "scalar": self._scalar}
        charged |= {"encode": self._encode, "bytes": self._bytes}
        return functools.partial(charged[name], found) if name in charged else found  # numpy.dtype allocates no data

    def _reconstruct(self, original: Callable, subtype: object, shape: object, dtype: object) -> np.ndarray:
        if subtype is not self.ndarray:  # the array's state (BUILD) is charged by this class only
            raise UnsafePickle(f"_reconstruct of {subtype!r:.200}, not numpy.ndarray")
        self.budget.charge("_reconstruct", _requested_bytes(shape, dtype, self.budget.limit))
        return original(subtype, shape, dtype)

    def _frombuffer(self, original: Callable, buffer: object, dtype: object, shape: object, order: object) -> object:
        self.budget.charge("_frombuffer", _requested_bytes(shape, dtype, self.budget.limit))
        return original(buffer, dtype, shape, order).view(self.ndarray)  # a view; a later state is charged too

    def _scalar(self, original: Callable, dtype: object, *args: object) -> object:
        self.budget.charge("scalar", _requested_bytes((), dtype, self.budget.limit))
        return original(dtype, *args)

    def _encode(self, original: Callable, text: object, encoding: object = "utf-8", errors: object = "strict") -> bytes:
        if not isinstance(text, str) or encoding not in LATIN1 or errors != "strict":
            raise UnsafePickle(f"_codecs.encode admits text to latin1, not {type(text).__name__} to {encoding!r:.40}")
        self.budget.charge("_codecs.encode", len(text))
        return original(text, "latin-1")

    def _bytes(self, original: Callable, *args: object) -> bytes:
        if args:  # bytes(n) would allocate n bytes
            raise UnsafePickle("bytes() admits no argument")
        return original()


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
    """[StreamID, timestamps, values] from one member; raises UnsafePickle or ValueError (with the reason). What it
    allocates is bounded by _Budget, counted before each allocation."""
    if len(data) > max_bytes:
        raise ValueError(f"member is {len(data):,} bytes, over the declared limit of {max_bytes:,}")
    budget = _Budget(len(data))
    _scan(data, budget)
    try:
        with warnings.catch_warnings():  # numpy's about odd states: the member is refused or read, not commented on
            warnings.simplefilter("ignore")
            obj = _Restricted(data, budget).load()
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
    check_text(obj[0], "StreamID")
    budget.charge(f"converting {len(obj[1]):,} values", len(obj[1]) * CONVERSION_PER_VALUE)
    with np.errstate(all="ignore"):  # NaN and overflow are judged per cell (bad_timestamp, non_finite), not warned
        timestamps, valid = _microseconds(np.asarray(obj[1]))
        values = _real_values(np.asarray(obj[2]))
    return Series(stream_id=obj[0], timestamps_us=timestamps, values=values, valid_ts=valid)
