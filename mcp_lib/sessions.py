"""One MCP session per in-house server per run, on a thread of its own, and the server's processes ended with it.

The SDK neither says a stdio server's pid nor ends a grandchild, so the server starts through ``/bin/sh`` writing
``$$`` (its group's id) to a file, and the group is ended after every close and at once when a call times out.
Its stderr goes only to the session's ``log``. Closed by ``Registry.close``, else at exit."""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import os
import shutil
import signal
import sys
import tempfile
import threading
import weakref
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import IO, Any, TextIO, TypeVar

from .cutting import excerpt
from .redact import redact_personal

T = TypeVar("T")
# Given the file a stdio server's pid goes to and the stream its stderr goes to.
Connect = Callable[[Path, TextIO], AbstractAsyncContextManager[Any]]
ServerLog = Callable[[str, str], None]  # (server name, one line of its stderr): where those lines go
LINE_BYTES = 64 * 1024  # of one stderr line read; the rest of a longer line is dropped
LINE_CHARS = 1000  # of one stderr line shown, cut after masking (no secret straddles the cut)
DRAIN_S = 2.0  # for the last stderr lines once the server's group is gone
KILL_GRACE_S = 2.0  # between SIGTERM and SIGKILL, as the SDK's own
CLOSE_WAIT_S = 10.0  # the SDK's polite shutdown (2 s) + our group kill, with room; only a wedged loop runs it out
_PRELUDE = 'echo $$ > "$1"; shift; exec "$@"'
_live: weakref.WeakSet[ServerSession] = weakref.WeakSet()


def stderr_log(mask: Callable[[str], str] = redact_personal) -> ServerLog:
    """A :data:`ServerLog` writing each line on stderr under the server's name, through ``mask`` (the registry's
    passes the credentials it holds too)."""

    def log(server: str, line: str) -> None:
        print(excerpt(mask(f"MCP server {server!r}: {line}"), LINE_CHARS), file=sys.stderr, flush=True)

    return log


masked_stderr = stderr_log()  # secrets and personal data masked, no credential values known


def _forward(pipe: IO[bytes], server: str, log: ServerLog) -> None:
    """Every line of a server's stderr to ``log``, until the last writer (server and children) closes it."""
    with pipe:
        while line := pipe.readline(LINE_BYTES):
            if not line.endswith(b"\n"):
                while (rest := pipe.readline(LINE_BYTES)) and not rest.endswith(b"\n"):
                    pass
            text = line.decode("utf-8", "replace").rstrip("\r\n")
            if text.strip():
                with contextlib.suppress(Exception):  # a sink's failure never ends the server's connection
                    log(server, text)


def group_command(command: str, args: list[str], pidfile: Path) -> tuple[str, list[str]]:
    """The command line that writes the server's pid (its group) to ``pidfile``, then becomes it (``exec``).
    Not on Windows, where the SDK's job object ends the tree."""
    if os.name != "posix":
        return command, args
    return "/bin/sh", ["-c", _PRELUDE, "helpbot-mcp", str(pidfile), command, *args]


async def end_group(pidfile: Path) -> None:
    """SIGTERM to the process group ``pidfile`` names, SIGKILL to what is left of it after :data:`KILL_GRACE_S`;
    then the pid file goes (one not yet whole stays, for a later end of the same connection)."""
    try:
        pgid = int(pidfile.read_text().strip())
    except (OSError, ValueError):  # no pid (yet)
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):  # no such group (any more)
        os.killpg(pgid, signal.SIGTERM)
        await _until(lambda: not _group_alive(pgid), KILL_GRACE_S, 0.02)
        os.killpg(pgid, signal.SIGKILL)
    with contextlib.suppress(OSError):
        pidfile.unlink()


async def _until(done: Callable[[], bool], timeout: float, every: float) -> None:
    """Poll ``done`` every ``every`` seconds until it holds or ``timeout`` has passed (the event loop's timer)."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(timeout):
            while not done():
                await asyncio.sleep(every)


def _group_alive(pgid: int) -> bool:
    """Whether a process of the group still runs; zombies do not count (a container's init may never reap them)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    proc = Path("/proc")
    if not proc.is_dir():
        return True
    for stat in proc.glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, IndexError, ValueError):
            state, _ppid, group = stat.read_text().rsplit(")", 1)[1].split()[:3]
            if int(group) == pgid and state not in ("Z", "X"):
                return True
    return False


class ServerSession:
    """One server's connection for the run: ``call(work, timeout)`` runs ``work(client)`` on it."""

    def __init__(self, name: str, connect: Connect, *, log: ServerLog = masked_stderr):
        self.name = name
        self._connect = connect
        self._log = log
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._dir: Path | None = None
        self._connections = 0
        # loop-thread state: the connection being opened or open, and what ends it
        self._ready: asyncio.Future[Any] | None = None
        self._holder: asyncio.Task[None] | None = None
        self._stop: asyncio.Event | None = None
        self._pidfile: Path | None = None

    def call(self, work: Callable[[Any], Awaitable[T]], timeout: float, connect_timeout: float) -> T:
        """``work(client)`` within ``timeout`` seconds (connecting first within ``connect_timeout``); TimeoutError
        once the server's processes were ended."""
        future = asyncio.run_coroutine_threadsafe(self._call(work, timeout, connect_timeout), self._running_loop())
        if not self._waited(future, connect_timeout + timeout + 2 * KILL_GRACE_S + CLOSE_WAIT_S):
            raise TimeoutError(f"no answer within {timeout:g} s")
        return future.result()

    def close(self) -> None:
        """End the connection and the server's whole group, and wait; a later call connects anew."""
        with self._lock:
            loop = self._loop
        if loop is not None:
            self._waited(asyncio.run_coroutine_threadsafe(self._end(kill_first=False), loop),
                         CLOSE_WAIT_S + 2 * KILL_GRACE_S)

    def _waited(self, future: concurrent.futures.Future[Any], timeout: float) -> bool:
        """Whether ``future`` is done within ``timeout``; else the loop itself is stuck and the server's group is
        ended from here."""
        with contextlib.suppress(TimeoutError):  # concurrent.futures' is the builtin
            future.result(timeout)
        if future.done():
            return True
        future.cancel()
        if self._pidfile is not None:
            asyncio.run(end_group(self._pidfile))
        return False

    async def _call(self, work: Callable[[Any], Awaitable[T]], timeout: float, connect_timeout: float) -> T:
        bound = connect_timeout
        try:
            async with asyncio.timeout(connect_timeout):
                client = await self._open()
            bound = timeout
            async with asyncio.timeout(timeout):
                return await work(client)
        except TimeoutError:
            await self._end(kill_first=True)
            raise TimeoutError(f"no answer within {bound:g} s") from None

    async def _open(self) -> Any:
        """The connected client; the first caller starts the connection, concurrent ones wait for the same."""
        if self._ready is None or (self._holder is not None and self._holder.done()):
            loop = asyncio.get_running_loop()
            self._ready, self._stop = loop.create_future(), asyncio.Event()
            self._ready.add_done_callback(lambda f: f.cancelled() or f.exception())  # read, even if no one waits
            self._connections += 1
            assert self._dir is not None
            self._pidfile = self._dir / f"pid{self._connections}"
            self._holder = loop.create_task(self._hold(self._ready, self._stop, self._pidfile))
        return await asyncio.shield(self._ready)

    async def _hold(self, ready: asyncio.Future[Any], stop: asyncio.Event, pidfile: Path) -> None:
        """The connection, open until ``stop`` (entered and left in this one task, as anyio requires); stderr is
        read until the group is gone."""
        read_fd, write_fd = os.pipe()
        reader = threading.Thread(target=_forward, args=(os.fdopen(read_fd, "rb"), self.name, self._log),
                                  name=f"mcp-{self.name}-stderr", daemon=True)
        reader.start()
        errlog = os.fdopen(write_fd, "w", encoding="utf-8")
        try:
            async with self._connect(pidfile, errlog) as client:
                ready.set_result(client)
                await stop.wait()
        except Exception as exc:
            if not ready.done():
                ready.set_exception(exc)
        finally:
            if not ready.done():
                ready.set_exception(ConnectionError(f"MCP server {self.name!r}: the connection was abandoned"))
            await end_group(pidfile)
            errlog.close()
            await _until(lambda: not reader.is_alive(), DRAIN_S, 0.01)  # polled: no executor at exit (atexit)

    async def _end(self, *, kill_first: bool) -> None:
        """Close the connection (the group ended first when a call timed out) and wait until the group is gone."""
        holder, ready, stop, pidfile = self._holder, self._ready, self._stop, self._pidfile
        self._ready = self._holder = self._stop = None
        if holder is None or ready is None or stop is None:
            return
        if kill_first and pidfile is not None:
            await end_group(pidfile)
        if ready.done():
            stop.set()  # the SDK's own shutdown, in the task that opened it
        else:
            holder.cancel()  # still connecting (a server that never answers initialize)
        await asyncio.wait({holder}, timeout=CLOSE_WAIT_S)
        if not holder.done() and pidfile is not None:
            await end_group(pidfile)

    def _running_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                self._dir = Path(tempfile.mkdtemp(prefix="helpbot-mcp-"))
                loop = asyncio.new_event_loop()
                threading.Thread(target=loop.run_forever, name=f"mcp-{self.name}", daemon=True).start()
                self._loop = loop
                _live.add(self)
            return self._loop

    def _discard(self) -> None:
        """At exit: the connection closed, the loop stopped, the pid files removed."""
        self.close()
        with self._lock:
            loop, self._loop = self._loop, None
        if loop is not None:
            loop.call_soon_threadsafe(loop.stop)
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)


@atexit.register
def close_all() -> None:
    """Every session of this process, closed (in parallel: each may wait out its server's shutdown)."""
    threads = [threading.Thread(target=s._discard, daemon=True) for s in list(_live)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(CLOSE_WAIT_S + 2 * KILL_GRACE_S)
