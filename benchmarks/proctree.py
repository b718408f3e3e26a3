"""A process tree's CPU time and memory from ``/proc`` (Linux): what the benchmarks report
beside wall times, since on two shared cores a wall time says less than the CPU it took."""

from __future__ import annotations

import os

TICKS = os.sysconf("SC_CLK_TCK")


def children() -> dict[int, list[int]]:
    """Every process's children, by parent id."""
    out: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                ppid = int(open(f"/proc/{d}/stat").read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            out.setdefault(ppid, []).append(int(d))
    return out


def tree(root: int, kids: dict[int, list[int]] | None = None) -> list[int]:
    """``root`` and every process under it."""
    kids = children() if kids is None else kids
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo += kids.get(pid, [])
    return out


def cpu_and_rss(pid: int) -> tuple[float, int] | None:
    """A process's CPU seconds so far (its own and its waited-for children's) and its RSS; None
    when it is gone."""
    try:
        fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        rss = int(open(f"/proc/{pid}/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, IndexError, ValueError):
        return None
    return sum(int(x) for x in fields[11:15]) / TICKS, rss


def tree_cpu(root: int | None = None) -> dict[int, float]:
    """CPU seconds so far of each process of ``root``'s tree (default: this process's): the
    difference of two calls, summed, is what the tree spent between them (a process that
    started and ended between the calls is missed unless its parent waited for it)."""
    out = {}
    for pid in tree(os.getpid() if root is None else root):
        got = cpu_and_rss(pid)
        if got is not None:
            out[pid] = got[0]
    return out


def cpu_between(before: dict[int, float], after: dict[int, float]) -> float:
    """CPU seconds the tree spent between two :func:`tree_cpu` readings."""
    return sum(secs - before.get(pid, 0.0) for pid, secs in after.items())
