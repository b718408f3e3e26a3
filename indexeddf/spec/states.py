"""Index lifecycle states (after Hyperspace), all in one place.

ACTIVE and DELETED are stable; every other state is transient: an index operation
commits one, does its work, then commits the stable state it ends in (PROTOCOL.md
4.5.3). Readers use an index only in a readable state.
"""

from __future__ import annotations

ACTIVE = "ACTIVE"
DELETED = "DELETED"

INDEX_STATES = ("CREATING", ACTIVE, "REFRESHING", "OPTIMIZING", "DELETING", DELETED, "RESTORING", "VACUUMING")
"""Every state an index entry may be in."""

STABLE_STATES = (ACTIVE, DELETED)
"""States an index rests in between operations."""

TRANSIENT_STATES = {
    "CREATING": "NONE",
    "REFRESHING": ACTIVE,
    "OPTIMIZING": ACTIVE,
    "DELETING": ACTIVE,
    "RESTORING": DELETED,
    "VACUUMING": DELETED,
}
"""Each transient state and the stable state an interrupted operation goes back to
(``NONE``: the index did not exist; cancelling leaves it DELETED and vacuumed)."""

READABLE_STATES = (ACTIVE, "REFRESHING", "OPTIMIZING")
"""States in which readers use an index. A transient state adds no files until its
stable commit, so during a refresh or optimize readers keep the last stable files."""
