"""Spark-compatible bucketing: ``hash(cols...)`` and ``pmod(hash(cols...), n)`` on Arrow.

Rows are assigned to buckets exactly as Spark's ``Murmur3Hash`` expression (seed 42)
would, so a table written here can be read with bucket pruning by Spark and a key
looked up from Python lands in the same bucket Spark would put it in.

The reference is Spark's ``org.apache.spark.sql.catalyst.expressions.HashExpression`` /
``Murmur3HashFunction`` and ``org.apache.spark.unsafe.hash.Murmur3_x86_32``:

* columns are folded left to right, each column's hash seeded with the running hash;
  a null value leaves the running hash unchanged;
* boolean/byte/short/int/date use ``hashInt``; long/timestamp use ``hashLong``;
* float/double hash ``floatToIntBits``/``doubleToLongBits`` with ``-0.0`` mapped to
  ``0`` and every NaN mapped to Java's canonical NaN;
* decimals of precision <= 18 hash the unscaled long; wider ones hash the bytes of
  ``BigInteger.toByteArray()`` of the unscaled value;
* strings (UTF-8) and binary use ``hashUnsafeBytes``, which is *not* textbook
  murmur3: each tail byte is mixed on its own, as a signed int.

Everything is vectorised with numpy ``uint32`` arithmetic (which wraps like Java
``int``). Variable-length values are processed one word position at a time for all
rows that are long enough, never one row at a time, except for the last few rows of
an unusually long value, where a scalar loop is cheaper than numpy's per-call cost.
Byte words are read little-endian, as Spark does on every platform it runs on.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.types as pat

from ..errors import InvalidOptionError, UnsupportedTypeError

__all__ = ["SEED", "spark_hash", "bucket_ids", "hash_python_values", "is_hashable_type", "key_hash", "seed_prefix"]

SEED = 42
"""Seed of Spark's ``hash()`` (``Murmur3Hash``); also the seed of its bucketing."""

_C1 = np.uint32(0xCC9E2D51)
_C2 = np.uint32(0x1B873593)
_M5 = np.uint32(5)
_N1 = np.uint32(0xE6546B64)
_F1 = np.uint32(0x85EBCA6B)
_F2 = np.uint32(0xC2B2AE35)
_MASK32 = 0xFFFFFFFF

# Java's Float.floatToIntBits / Double.doubleToLongBits collapse every NaN to these.
_FLOAT_NAN_BITS = np.uint32(0x7FC00000)
_DOUBLE_NAN_BITS = np.uint64(0x7FF8000000000000)

# Timestamps: Spark stores microseconds since the epoch; multiply or floor-divide.
_TO_MICROS = {"s": (1_000_000, 1), "ms": (1_000, 1), "us": (1, 1), "ns": (1, 1_000)}

# Bit length of each byte value, for BigInteger.toByteArray() lengths.
_BYTE_BITLEN = np.array([i.bit_length() for i in range(256)], dtype=np.int64)

# Below this many rows still active, hashing long values row by row in plain Python is
# cheaper than paying numpy's per-call overhead once per word position.
_SCALAR_ROWS = 8

_SUPPORTED = (
    "bool, int8, int16, int32, int64, float32, float64, date32, timestamp[s|ms|us|ns] "
    "(with or without tz), decimal128(p, s), string, large_string, binary, large_binary, "
    "and dictionary arrays of these"
)


# --------------------------------------------------------------------------------------
# Murmur3_x86_32 primitives on uint32 arrays (wrap-around multiply = Java int multiply).
# --------------------------------------------------------------------------------------


def _rotl(x: np.ndarray, r: int) -> np.ndarray:
    return (x << np.uint32(r)) | (x >> np.uint32(32 - r))


def _mix_k1(k: np.ndarray) -> np.ndarray:
    """``mixK1``; ``k`` is consumed (modified in place)."""
    k *= _C1
    k = _rotl(k, 15)
    k *= _C2
    return k


def _mix_h1(h: np.ndarray, k: np.ndarray) -> np.ndarray:
    """``mixH1``; ``h`` is consumed (modified in place)."""
    h ^= k
    h = _rotl(h, 13)
    h *= _M5
    h += _N1
    return h


def _fmix(h: np.ndarray, length) -> np.ndarray:
    """``fmix``; ``length`` is a scalar or a per-row uint32 array; ``h`` is consumed."""
    h ^= length if isinstance(length, np.ndarray) else np.uint32(length)
    h ^= h >> np.uint32(16)
    h *= _F1
    h ^= h >> np.uint32(13)
    h *= _F2
    h ^= h >> np.uint32(16)
    return h


def _hash_int(values: np.ndarray, seeds: np.ndarray) -> np.ndarray:
    """``Murmur3_x86_32.hashInt`` of uint32 ``values`` with per-row ``seeds``."""
    h = _mix_h1(seeds.copy(), _mix_k1(values.astype(np.uint32, copy=True)))
    return _fmix(h, 4)


def _hash_long(values: np.ndarray, seeds: np.ndarray) -> np.ndarray:
    """``Murmur3_x86_32.hashLong`` of int64/uint64 ``values``: low word, then high word."""
    u = values.view(np.uint64) if values.dtype == np.int64 else values.astype(np.uint64)
    low = u.astype(np.uint32)  # truncation keeps the low 32 bits, like Java's (int) cast
    high = (u >> np.uint64(32)).astype(np.uint32)
    h = _mix_h1(seeds.copy(), _mix_k1(low))
    h = _mix_h1(h, _mix_k1(high))
    return _fmix(h, 8)


def _scalar_bytes_words(h: int, words: list[int]) -> int:
    """Body of ``hashBytesByInt`` for one row, in Python ints (for very long values)."""
    for k in words:
        k = (k * 0xCC9E2D51) & _MASK32
        k = ((k << 15) | (k >> 17)) & _MASK32
        k = (k * 0x1B873593) & _MASK32
        h ^= k
        h = ((h << 13) | (h >> 19)) & _MASK32
        h = (h * 5 + 0xE6546B64) & _MASK32
    return h


def _hash_bytes(data: np.ndarray, starts: np.ndarray, lengths: np.ndarray, seeds: np.ndarray) -> np.ndarray:
    """Spark's ``hashUnsafeBytes`` of ``data[starts[i]:starts[i]+lengths[i]]`` for every row.

    The body is hashed one word position at a time across all rows that still have a
    full word there (the set of active rows only shrinks); then up to three tail bytes,
    each mixed alone as a sign-extended int; then ``fmix`` with the byte length.
    ``seeds`` may be 2-D (a row of seeds per hash, :func:`_spark_hashes`): each word is
    read and mixed once for all of them.
    """
    h = seeds.copy()
    starts = starts.astype(np.int64, copy=False)
    lengths = lengths.astype(np.int64, copy=False)
    nwords = lengths >> 2

    idx = np.flatnonzero(nwords)
    if idx.size:
        # A uint32 view starting at *every* byte (stride 1): one gather reads the
        # little-endian word at any unaligned position, as Platform.getInt does.
        words = np.ndarray(shape=(data.size - 3,), dtype="<u4", buffer=data, strides=(1,))
        pos = starts[idx]
        rem = nwords[idx]
        while idx.size > _SCALAR_ROWS:
            if idx.size == h.shape[-1]:  # every row still active (keys of one length): no gather, no scatter of h
                h = _mix_h1(h, _mix_k1(words[pos]))
            else:
                h[..., idx] = _mix_h1(h[..., idx], _mix_k1(words[pos]))
            pos += 4
            rem -= 1
            keep = rem > 0
            if not keep.all():
                idx, pos, rem = idx[keep], pos[keep], rem[keep]
        rows = h.reshape(-1, h.shape[-1])  # a view: h is a fresh contiguous array here
        for i, p, r in zip(idx.tolist(), pos.tolist(), rem.tolist()):
            body = words[p : p + 4 * r : 4].tolist()
            for row in rows:
                row[i] = _scalar_bytes_words(int(row[i]), body)

    tail = lengths & 3
    idx = np.flatnonzero(tail)
    if idx.size:
        signed = data.view(np.int8)
        pos = starts[idx] + (nwords[idx] << 2)
        rem = tail[idx]
        while idx.size:
            # Java: int halfWord = getByte(...) -> sign-extended, then mixK1/mixH1.
            k = signed[pos].astype(np.int32).view(np.uint32)
            h[..., idx] = _mix_h1(h[..., idx], _mix_k1(k))
            pos += 1
            rem -= 1
            keep = rem > 0
            if not keep.all():
                idx, pos, rem = idx[keep], pos[keep], rem[keep]

    return _fmix(h, lengths.astype(np.uint32))


# --------------------------------------------------------------------------------------
# Reading Arrow buffers without copies (offset-aware).
# --------------------------------------------------------------------------------------


def _unpack_bits(buf: pa.Buffer, offset: int, n: int) -> np.ndarray:
    """Bits ``offset .. offset+n`` of an Arrow (LSB-first) bitmap as a bool array."""
    raw = np.frombuffer(buf, dtype=np.uint8)[offset // 8 : (offset + n + 7) // 8]
    bits = np.unpackbits(raw, bitorder="little")
    start = offset % 8
    return bits[start : start + n].view(np.bool_)


def _validity(arr: pa.Array) -> np.ndarray | None:
    """Per-row validity as bools, or None when the array has no nulls."""
    if arr.null_count == 0:
        return None
    buf = arr.buffers()[0]
    if buf is None:  # e.g. a NullArray-like layout; every row is null
        return np.zeros(len(arr), dtype=np.bool_)
    return _unpack_bits(buf, arr.offset, len(arr))


def _fixed(arr: pa.Array, dtype, width: int = 1) -> np.ndarray:
    """The values buffer of a fixed-width array, sliced to the array (``width`` items per row)."""
    n, off = len(arr), arr.offset
    buf = arr.buffers()[1]
    return np.frombuffer(buf, dtype=dtype, count=(off + n) * width)[off * width :]


def _var_offsets(arr: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(data bytes, offsets[n+1]) of a string/binary array, honouring the array offset."""
    n, off = len(arr), arr.offset
    bufs = arr.buffers()
    odt = np.int64 if (pat.is_large_string(arr.type) or pat.is_large_binary(arr.type)) else np.int32
    offsets = np.frombuffer(bufs[1], dtype=odt, count=off + n + 1)[off:]
    data = np.frombuffer(bufs[2], dtype=np.uint8) if bufs[2] is not None else np.empty(0, np.uint8)
    return data, offsets


def _decimal_java_bytes(raw: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``BigInteger.toByteArray()`` of 128-bit little-endian values, flattened.

    ``raw`` is (n, 16) uint8. Java emits the minimal big-endian two's complement:
    ``bitLength() / 8 + 1`` bytes, where bitLength excludes the sign bit. Returns
    (data, starts, lengths) for :func:`_hash_bytes`.
    """
    n = raw.shape[0]
    be = raw[:, ::-1]
    negative = be[:, 0] >= 0x80
    # For negatives, bitLength is that of ~x; XOR with 0xFF per byte computes ~x.
    mag = be ^ np.where(negative, np.uint8(0xFF), np.uint8(0))[:, None]
    nonzero = mag != 0
    any_nz = nonzero.any(axis=1)
    first = nonzero.argmax(axis=1)
    top = mag[np.arange(n), first]
    bitlen = np.where(any_nz, (15 - first) * 8 + _BYTE_BITLEN[top], 0)
    lengths = bitlen // 8 + 1
    keep = np.arange(16)[None, :] >= (16 - lengths)[:, None]
    data = np.ascontiguousarray(be[keep])  # row-major, so each row's bytes stay in order
    starts = np.zeros(n, dtype=np.int64)
    np.cumsum(lengths[:-1], out=starts[1:])
    return data, starts, lengths


# --------------------------------------------------------------------------------------
# One column, one chunk.
# --------------------------------------------------------------------------------------


def _unsupported(t: pa.DataType) -> UnsupportedTypeError:
    return UnsupportedTypeError(
        f"cannot hash or bucket by a column of Arrow type {t}; supported types are: {_SUPPORTED}"
    )


def _value_hash(arr: pa.Array, seeds: np.ndarray) -> np.ndarray:
    """Spark's per-value hash of every row of ``arr``, seeded per row (nulls not handled)."""
    t = arr.type
    if pat.is_boolean(t):
        vals = _unpack_bits(arr.buffers()[1], arr.offset, len(arr)).astype(np.uint32)
        return _hash_int(vals, seeds)
    if pat.is_int8(t) or pat.is_int16(t) or pat.is_int32(t) or pat.is_date32(t):
        dt = {1: np.int8, 2: np.int16, 4: np.int32}[t.bit_width // 8]
        # Sign-extend to int32 first: Java widens byte/short to int before hashing.
        return _hash_int(_fixed(arr, dt).astype(np.int32).view(np.uint32), seeds)
    if pat.is_int64(t):
        return _hash_long(_fixed(arr, np.int64), seeds)
    if pat.is_timestamp(t):
        vals = _fixed(arr, np.int64)
        mul, div = _TO_MICROS[t.unit]
        if mul != 1:
            vals = vals * np.int64(mul)  # wraps only beyond +-292,000 years, where Spark fails
        if div != 1:
            vals = np.floor_divide(vals, np.int64(div))  # floors toward -inf, like Spark
        return _hash_long(vals, seeds)
    if pat.is_float32(t):
        vals = _fixed(arr, np.float32)
        bits = vals.view(np.uint32).copy()
        bits[vals == 0] = 0  # -0.0 == 0.0, so both hash as int 0
        bits[np.isnan(vals)] = _FLOAT_NAN_BITS
        return _hash_int(bits, seeds)
    if pat.is_float64(t):
        vals = _fixed(arr, np.float64)
        bits = vals.view(np.uint64).copy()
        bits[vals == 0] = 0
        bits[np.isnan(vals)] = _DOUBLE_NAN_BITS
        return _hash_long(bits, seeds)
    if pat.is_decimal128(t):
        if t.precision <= 18:
            # Little-endian 128-bit two's complement: the low word is the unscaled long.
            return _hash_long(_fixed(arr, np.int64, 2)[0::2], seeds)
        raw = _fixed(arr, np.uint8, 16).reshape(-1, 16)
        return _hash_bytes(*_decimal_java_bytes(raw), seeds)
    if pat.is_string(t) or pat.is_large_string(t) or pat.is_binary(t) or pat.is_large_binary(t):
        data, offsets = _var_offsets(arr)
        starts = offsets[:-1]
        return _hash_bytes(data, starts, offsets[1:] - starts, seeds)
    raise _unsupported(t)


def _fold_column(arr: pa.Array, seeds: np.ndarray) -> np.ndarray:
    """Fold one chunk of one column into the running hash ``seeds`` (one per row)."""
    if pat.is_dictionary(arr.type):
        arr = arr.dictionary_decode()
    if len(arr) == 0:
        return seeds.copy()
    valid = _validity(arr)
    if valid is not None and not valid.any():
        return seeds.copy()
    out = _value_hash(arr, seeds)
    if valid is not None:
        # Null keeps the running hash, exactly as Spark skips null children.
        np.copyto(out, seeds, where=~valid)
    return out


# --------------------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------------------


def is_hashable_type(t: pa.DataType) -> bool:
    """Whether a column of Arrow type ``t`` can be a bucketing key (hashed like Spark)."""
    if pat.is_dictionary(t):
        return is_hashable_type(t.value_type)
    return (
        pat.is_boolean(t)
        or pat.is_int8(t)
        or pat.is_int16(t)
        or pat.is_int32(t)
        or pat.is_int64(t)
        or pat.is_float32(t)
        or pat.is_float64(t)
        or pat.is_date32(t)
        or pat.is_timestamp(t)
        or pat.is_decimal128(t)
        or pat.is_string(t)
        or pat.is_large_string(t)
        or pat.is_binary(t)
        or pat.is_large_binary(t)
    )


SMALL_CHUNKS = 4096
"""Rows a column's chunks average below which they are concatenated before hashing: each
chunk costs a few numpy calls, which dominate for the many small chunks of gathered rows."""


HASH_BLOCK = 1 << 15
"""Rows hashed at a time: a block's running hashes and word positions stay in the CPU's
cache across a string's word positions (64-character strings: twice as fast as whole
row groups of a million rows, and numpy's per-call cost is still small at this size)."""


def spark_hash(columns: Sequence[pa.Array | pa.ChunkedArray], seed: int = SEED) -> np.ndarray:
    """Spark's ``hash(col1, col2, ...)`` for every row, as an int32 numpy array.

    Columns are folded left to right: each column's hash is seeded with the previous
    result (the first with ``seed``), and a null value leaves the running hash
    unchanged, so an all-null row hashes to ``seed``. Chunked arrays may have any chunk
    layout; dictionary arrays are decoded. Raises :class:`UnsupportedTypeError` for
    types Spark cannot match (see :func:`is_hashable_type`) and
    :class:`InvalidOptionError` for no columns or columns of different lengths.
    """
    return _spark_hashes(columns, (seed,))[0].view(np.int32)


def _spark_hashes(columns: Sequence[pa.Array | pa.ChunkedArray], seeds: Sequence[int]) -> np.ndarray:
    """:func:`spark_hash` of the same rows with each of ``seeds``, as uint32 of shape
    ``(len(seeds), rows)``: the columns are read and each value's words mixed once for
    every seed (an index build needs the bucket and the key hash of every key)."""
    if len(columns) == 0:
        raise InvalidOptionError("spark_hash needs at least one column, as Spark's hash() does")
    for col in columns:
        if not is_hashable_type(col.type):
            raise _unsupported(col.type)
    n = len(columns[0])
    lengths = [len(c) for c in columns]
    if any(m != n for m in lengths):
        raise InvalidOptionError(f"all columns to hash must have the same length, got {lengths}")

    # Java int bits of each seed, a row per seed
    h = np.repeat(np.array([int(x) & _MASK32 for x in seeds], dtype=np.uint32)[:, None], n, axis=1)
    for col in columns:
        if isinstance(col, pa.ChunkedArray) and col.num_chunks > 1 and len(col) < SMALL_CHUNKS * col.num_chunks \
                and not pat.is_dictionary(col.type):
            col = col.combine_chunks()  # rows gathered by takes: a chunk a few rows, hashed at once
        chunks = col.chunks if isinstance(col, pa.ChunkedArray) else [col]
        # Hash chunk by chunk against the matching slice of the running hash: no
        # concatenation copy, and chunk boundaries need not line up across columns.
        start = 0
        for chunk in chunks:
            for lo in range(0, len(chunk), HASH_BLOCK):
                piece = chunk.slice(lo, HASH_BLOCK)
                stop = start + len(piece)
                h[:, start:stop] = _fold_column(piece, h[:, start:stop])
                start = stop
    return h


def bucket_ids(columns: Sequence[pa.Array | pa.ChunkedArray], num_buckets: int) -> np.ndarray:
    """Spark's ``pmod(hash(col1, ...), num_buckets)`` for every row, as int32 in ``[0, n)``."""
    _check_buckets(num_buckets)  # before any hashing
    return _pmod(spark_hash(columns), num_buckets)


def _check_buckets(num_buckets) -> None:
    """Refuses a bucket count that is not a positive integer."""
    if isinstance(num_buckets, bool) or not isinstance(num_buckets, (int, np.integer)) or num_buckets <= 0:
        raise InvalidOptionError(f"num_buckets must be a positive integer, got {num_buckets!r}")


def _pmod(hashes: np.ndarray, num_buckets: int) -> np.ndarray:
    """``pmod(hash, num_buckets)`` of int32 ``hashes``, as int32."""
    n = int(num_buckets)
    if n > _MASK32 >> 1:  # past int32: in int64 (and back, as Spark's int result wraps)
        return (hashes.astype(np.int64) % n).astype(np.int32)
    if n & (n - 1) == 0:  # a power of two: the low bits of the two's complement are pmod's
        return hashes & np.int32(n - 1)
    # numpy's % with a positive divisor is already non-negative (floored), like pmod.
    return np.remainder(hashes, np.int32(n))


def hash_python_values(
    values: Sequence[tuple],
    types: Sequence[pa.DataType],
    num_buckets: int | None = None,
) -> np.ndarray:
    """Hash rows of Python key tuples (one value per type) for lookups.

    Each position becomes ``pa.array([...], type=types[i])``; returns :func:`spark_hash`
    of those columns (int32), or :func:`bucket_ids` when ``num_buckets`` is given.
    ``None`` is a null key value.
    """
    rows = [tuple(r) for r in values]
    for r in rows:
        if len(r) != len(types):
            raise InvalidOptionError(f"key {r!r} has {len(r)} values but {len(types)} key types were given")
    columns = [pa.array([r[i] for r in rows], type=t) for i, t in enumerate(types)]
    if num_buckets is None:
        return spark_hash(columns)
    return bucket_ids(columns, num_buckets)


KEY_HASH_SEED = 0x2545F491
"""Seed of the key hash that index files and tries are sorted and probed by."""

INDEX_BLOCK_SHARE = 0.5
"""Index files are sorted by key hash in row groups (blocks), each a hash range. A probe
reads only the blocks whose range holds one of its hashes while they are at most this
share of the file's blocks; past it (a join, a long IN list) it reads the file whole. The
Python reader and the connector choose alike."""


def key_hash(columns: Sequence[pa.Array | pa.ChunkedArray]) -> np.ndarray:
    """The 32-bit key hash of index entries (uint32): Spark's hash with another seed.

    Within one bucket Spark's own hash (seed 42) agrees modulo the bucket count, so a
    differently seeded hash keeps keys apart there. It is a filter, not an identity:
    equal hashes are always verified against the key values.
    """
    return spark_hash(columns, seed=KEY_HASH_SEED).view(np.uint32)


def bucket_ids_and_key_hash(columns: Sequence[pa.Array | pa.ChunkedArray],
                            num_buckets: int) -> tuple[np.ndarray, np.ndarray]:
    """:func:`bucket_ids` and :func:`key_hash` of the same rows in one pass over the keys
    (a string's words are read and mixed once for both seeds): what a write or an index
    build needs of every key."""
    _check_buckets(num_buckets)  # before any hashing
    both = _spark_hashes(columns, (SEED, KEY_HASH_SEED))
    return _pmod(both[0].view(np.int32), num_buckets), both[1]


def seed_prefix(seed: int, start: int = SEED) -> int:
    """The int32 ``x`` whose Spark hash from seed ``start`` is ``seed``: Spark's
    ``hash(x, c1, c2, ...)`` (seed 42) then equals the hash of ``c1, c2, ...`` seeded with
    ``seed``, which lets Spark's own ``hash()`` compute :func:`key_hash` (``x`` =
    ``seed_prefix(KEY_HASH_SEED)``). Every step of Murmur3's ``hashInt`` is a bijection of
    32-bit words, undone here in reverse order."""

    def inverse(a: int) -> int:
        return pow(a, -1, 1 << 32)

    def rotr(v: int, r: int) -> int:
        return ((v >> r) | (v << (32 - r))) & _MASK32

    h = seed & _MASK32
    # fmix(h, 4): three xor-shifts and two multiplies, each undone.
    h ^= h >> 16
    h = (h * inverse(int(_F2))) & _MASK32
    h ^= (h >> 13) ^ (h >> 26)
    h = (h * inverse(int(_F1))) & _MASK32
    h ^= h >> 16
    h ^= 4
    # mixH1(start, k) = rotl(start ^ k, 13) * 5 + N1, then mixK1(x) = rotl(x * C1, 15) * C2.
    k = rotr(((h - int(_N1)) * inverse(int(_M5))) & _MASK32, 13) ^ (start & _MASK32)
    x = (rotr((k * inverse(int(_C2))) & _MASK32, 15) * inverse(int(_C1))) & _MASK32
    return x - (1 << 32) if x >= 1 << 31 else x
