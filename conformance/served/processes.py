"""The server's processes as Linux sees them: the /proc table, a process tree, who is still alive.

Also the SIGTERM guard that turns a terminated caller into ``SystemExit`` while
it serves, so the caller's ``finally`` still stops the server. What
:func:`conformance.served.server.serve` uses to prove no process is left.

Out of scope: sending the stop signals and the bounds on them
(:mod:`conformance.served.server`), other platforms' process tables.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Mapping

#: ``{pid: (state, ppid, pgid, sid, starttime)}``
ProcTable = Mapping[int, tuple[str, int, int, int, int]]


def proc_table() -> dict[int, tuple[str, int, int, int, int]]:
    """``{pid: (state, ppid, pgid, sid, starttime)}`` from /proc (Linux)."""
    table = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="utf-8", errors="replace") as fh:
                stat = fh.read()
        except OSError:
            continue
        rest = stat[stat.rfind(")") + 2 :].split()
        table[int(entry)] = (rest[0], int(rest[1]), int(rest[2]), int(rest[3]), int(rest[19]))
    return table


def process_tree(root: int, table: ProcTable) -> set[tuple[int, int]]:
    """``(pid, starttime)`` of ``root``, its descendants and everything in its session or group."""
    found = {pid for pid, (_, _, pgid, sid, _) in table.items() if pid == root or root in (pgid, sid)}
    grew = True
    while grew:
        grew = False
        for pid, (_, ppid, *_x) in table.items():
            if ppid in found and pid not in found:
                found.add(pid)
                grew = True
    return {(pid, table[pid][4]) for pid in found}


def alive(known: set[tuple[int, int]], root: int) -> list[int]:
    """Pids still running (zombies excluded) from ``known``, or in ``root``'s session/group."""
    table = proc_table()
    left = {p for p, start in known if p in table and table[p][4] == start and table[p][0] != "Z"}
    left |= {p for p, (state, _, pgid, sid, _) in table.items() if root in (pgid, sid) and state != "Z"}
    return sorted(left)


def exit_on_sigterm() -> Callable[[], None]:
    """While serving, SIGTERM raises SystemExit (so ``finally`` stops the server); returns the undo.

    Only in the main thread and only over the default handler; a handler the
    caller installed is left alone.
    """
    import threading

    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return lambda: None

    def _raise(signum, _frame):
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, _raise)
    return lambda: signal.signal(signal.SIGTERM, signal.SIG_DFL)
