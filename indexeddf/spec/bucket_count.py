"""How many buckets a new table gets when its creator does not say (``num_buckets`` /
``numBuckets`` left out): enough that one bucket holds about a target size of data.

A bucket's file is what a lookup, a copy-on-write change and a join's task read, so its
size, not the table's, should set their cost. The rule (:func:`default_num_buckets`):
the size of the data written at create divided by the target
(``indexeddf.buckets.targetFileSize``, default :data:`DEFAULT_TARGET_BYTES`), rounded up
to a power of two, never below :data:`DEFAULT_NUM_BUCKETS` (small tables keep the count
they always had) and never above :data:`MAX_DEFAULT_BUCKETS` (an append writes up to one
file a bucket). Powers of two keep later changes cheap to reason about: bucket ``b`` of
``n`` buckets is buckets ``b`` and ``b + n`` of ``2n`` (``pmod`` by ``2n`` then by ``n``
gives ``pmod`` by ``n``), and Spark coalesces or splits bucketed join sides only when one
count divides the other. The count is chosen once; later writes keep the table's.
"""

from __future__ import annotations

from . import config

MAX_BUCKETS = 1 << 16
"""The most buckets a table may have."""

DEFAULT_NUM_BUCKETS = 16
"""The fewest buckets the rule gives, and the count when the size is unknown."""
MAX_DEFAULT_BUCKETS = 1024
"""The most buckets the rule gives (an explicit ``num_buckets`` may go to 65536)."""
TARGET_PROPERTY = "indexeddf.buckets.targetFileSize"
"""The table property that sets the target bytes of data a bucket holds."""
DEFAULT_TARGET_BYTES = config.DEFAULT_BUCKET_TARGET_BYTES
"""256 MiB: Spark reads files in splits of 128 MiB and Delta's tuned file sizes start at
256 MiB; data measured in memory (Arrow) shrinks 2-4x as Parquet, so a bucket's file lands
in that range."""


def default_num_buckets(size_bytes: int | None, configuration: dict[str, str] | None = None) -> int:
    """The bucket count for a new table of ``size_bytes`` of data (None: unknown), with the
    target of ``configuration`` (its table properties) or the default."""
    target = config.get(configuration or {}, TARGET_PROPERTY)
    if not size_bytes or size_bytes <= 0:
        return DEFAULT_NUM_BUCKETS
    wanted = -(-int(size_bytes) // target)  # ceil: a bucket holds at most about the target
    n = DEFAULT_NUM_BUCKETS
    while n < wanted and n < MAX_DEFAULT_BUCKETS:
        n *= 2
    return n
