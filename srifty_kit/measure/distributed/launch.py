"""Start one world of worker processes on this machine and watch it: rows, death, silence.

The workers (torch multiprocessing, spawn) meet at a free port on 127.0.0.1 and report through
a queue; the parent keeps every row they send, and ends the world when a worker exits without
saying it is done, reports an error, or nothing is heard for the timeout.
"""

from __future__ import annotations

import contextlib
import queue
import signal
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any, NamedTuple

from srifty_kit.errors import check_interrupt
from srifty_kit.measure import host
from srifty_kit.measure.distributed.worker import Plan, spawned_worker

_GRACE_S = 2.0  # after a failure, how long the other workers get to report their own cause
_STARTUP_S = 60.0  # spawning and importing torch on a busy machine, before any word


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def _interrupts_deferred() -> Iterator[None]:
    """Hold SIGINT/SIGTERM until the block ends, then deliver them to the handlers that were
    in place. Starting a spawned process is a handshake over a pipe: interrupted half-way, the
    child reads half a message and prints a traceback before anyone can stop it."""
    if threading.current_thread() is not threading.main_thread():
        yield  # only the main thread may set handlers; it is the one signals interrupt
        return
    held: list[int] = []
    kinds = (signal.SIGINT, signal.SIGTERM)
    before = {s: signal.getsignal(s) for s in kinds}
    kinds = tuple(s for s in kinds if before[s] not in (signal.SIG_IGN, None))
    for s in kinds:
        signal.signal(s, lambda signum, frame: held.append(signum))
    try:
        yield
    finally:
        for s in kinds:
            signal.signal(s, before[s])
        for s in dict.fromkeys(held):
            signal.raise_signal(s)


class Failure(NamedTuple):
    """How a world size ended early: one line, and whether it was the user's input (with
    the fix, said after what the run kept)."""

    line: str
    bad_input: bool = False
    fix: str | None = None


class _Group:
    """The parent's side of one world size: start, collect, watch for death and silence."""

    def __init__(self, world: int, plan: Plan, threads: int) -> None:
        import torch.multiprocessing as mp

        ctx = mp.get_context("spawn")
        self.q = ctx.Queue()
        self.world = world
        port = _free_port()
        self.procs = [
            ctx.Process(
                target=spawned_worker, args=(r, world, port, plan, threads, self.q), daemon=True
            )
            for r in range(world)
        ]
        self.doing: dict[int, str] = {}
        self.done: set[int] = set()
        self.errors: dict[int, dict[str, Any]] = {}
        with _interrupts_deferred():  # a half-sent start leaves a child to die with a traceback
            for p in self.procs:
                p.start()

    def drain(self, sink: dict[str, list], timeout: float) -> bool:
        """Take queued messages (waiting up to ``timeout`` for the first); True if any came."""
        got = False
        while True:
            try:
                kind, payload = self.q.get(timeout=timeout if not got else 0.0)
            except queue.Empty:
                return got
            got = True
            if kind in ("row", "collective", "skipped"):
                sink[kind].append(payload)
            elif kind == "config":
                self.doing[payload["rank"]] = payload["what"]
            elif kind == "done":
                self.done.add(payload["rank"])
            elif kind == "error":
                self.errors[payload["rank"]] = payload

    def dead(self) -> dict[int, int]:
        """Ranks that exited without reporting done: rank -> exit code."""
        return {
            r: p.exitcode
            for r, p in enumerate(self.procs)
            if p.exitcode is not None and r not in self.done
        }

    def stop(self) -> None:
        """Terminate the workers still alive."""
        for p in self.procs:
            if p.is_alive():
                p.terminate()
        for p in self.procs:
            p.join(5)
            if p.is_alive():
                p.kill()
                p.join(5)

    def cause(self, what: str, timeout_s: float) -> Failure:
        """Which worker failed first and how, in one line; whether it was bad input (the
        first bad input that arrived: the others' failures follow from it), and its fix."""
        dead = self.dead()
        silent = [r for r in dead if r not in self.errors]  # died without a word: the origin
        if silent:
            r = silent[0]
            code = dead[r]
            how = f"was killed by signal {-code}" if code < 0 else f"exited with code {code}"
            return Failure(
                f"worker rank {r} of {self.world} {how} while measuring {self.doing.get(r, what)}"
            )
        if self.errors:
            inputs = [e for e in self.errors.values() if e["input_error"]]
            first = inputs[0] if inputs else min(self.errors.values(), key=lambda e: e["rank"])
            doing = self.doing.get(first["rank"], what)
            if inputs:  # the user's mistake, said as it was raised, with where it surfaced
                where = f"worker rank {first['rank']} of {self.world}, measuring {doing}"
                return Failure(f"{first['cause']} ({where})", True, first.get("fix"))
            return Failure(
                f"worker rank {first['rank']} of {self.world} failed while measuring "
                f"{doing}: {first['cause']}"
            )
        return Failure(
            f"no worker of world size {self.world} answered for {timeout_s:g} s while "
            f"measuring {self.doing.get(0, what)} (hung?)"
        )


def measure_world(
    world: int, plan: Plan, sink: dict[str, list], timeout_s: float, bar: Any
) -> Failure | None:
    """Run one world size to the end; how it failed, or None."""
    threads = max(1, host.cpu_cores() // world)  # the workers share the cores
    group = _Group(world, plan, threads)
    last = time.monotonic()
    try:
        while len(group.done) < world:
            check_interrupt()  # one a library swallowed still stops the workers
            if group.drain(sink, timeout=0.2):
                last = time.monotonic()
                said = {"world": world, "steps": len(sink["row"])}
                if sink["collective"]:  # the all-reduce sweep's timings, where one runs
                    said["all-reduce timings"] = len(sink["collective"])
                # refresh=False: a terminal draws it at the next count
                bar.set_postfix(said, refresh=False)
            if group.errors or group.dead():
                group.drain(sink, timeout=_GRACE_S)  # a "done" in flight, or the others' causes
                if group.errors or group.dead():
                    return group.cause(f"world size {world}", timeout_s)
            # before the first word, allow for starting processes and importing torch
            allowed = timeout_s if group.doing else max(timeout_s, _STARTUP_S)
            if time.monotonic() - last > allowed:
                return group.cause(f"world size {world}", allowed)
        return None
    finally:
        group.stop()
