"""One `mathmix run` at a time per run folder: an exclusive advisory lock on RUN/.mathmix-run.lock.

Two runs on one folder ran the same stages into the same outputs and records and corrupted each other. The lock
is `flock` on a small file in the run folder, which names its holder (pid, host, start time) for the refusal. The
kernel drops it when the holding process ends, however it ends: a killed run never leaves the folder locked.

The file is removed by its holder, while it still holds the lock, when the run ends: a failed run removes the run
folder it made where that is left empty, which the file would otherwise keep. A run that takes the lock checks that the file it
locked is still the one at the path: one opened just before the holder removed it is a removed file, whose lock
guards nothing, and the run takes the new one instead. A file left by a killed run is taken over and removed.
"""

from __future__ import annotations

import fcntl
import os
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from rich.markup import escape

from mathmix.cli_util import console

LOCK_FILE = ".mathmix-run.lock"
# How long a refused lock is tried again before the run is refused: `other_holder` (a stage command asking whether
# the folder is in use) holds a shared lock for a moment, and a run starting in that moment was told the folder
# was in use by nobody. A run's own hold lasts the whole run: a real holder is still refused within this.
RETRY_SECONDS = 0.5
_HELD: set[Path] = set()  # lock files this process holds: a nested hold of one is a no-op


class RunFolderBusy(ValueError):
    """Another process holds the run folder's lock: the message names the folder and the holder."""


@contextmanager
def run_folder_lock(run_dir: Path) -> Iterator[None]:
    """Hold RUN_DIR's lock (making RUN_DIR) for the block; the lock file is removed as the block ends. Nested in a
    block of this process that holds it already, it does nothing (`flock` would refuse the process its own lock).

    Raises:
        RunFolderBusy: another process holds it (refused within `RETRY_SECONDS`, never waited for: a probe of
            `other_holder`, which holds it shared for a moment, is no holder).
        ValueError: the run folder or its lock file cannot be made (a read-only or missing parent, say).
    A file system without `flock` (Lustre mounted without `-o flock`) runs unguarded, with a warning: refusing
    every run there would be worse than the race the lock guards against.
    """
    path = Path(run_dir).resolve() / LOCK_FILE
    if path in _HELD:  # this process holds it already (quickstart holds it around its sample and its run)
        yield
        return
    fd = _acquire(path)
    _HELD.add(path)
    try:
        yield
    finally:
        _HELD.discard(path)
        if fd is not None:
            _release(fd, path)


def _acquire(path: Path) -> int | None:
    """A descriptor of PATH holding its lock, with the holder written in it; None where locks are not supported."""
    while True:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = _open(path)
        except OSError as err:
            raise ValueError(
                f"{path.parent}: cannot make the run folder's lock file {path.name} ({err})"
            ) from None
        try:
            _lock_soon(fd)
        except BlockingIOError:
            holder = _holder(fd)
            os.close(fd)
            raise RunFolderBusy(
                f"{path.parent}: another mathmix run is using this run folder ({holder}); wait for it to end, or "
                "end that run, then rerun"
            ) from None
        except OSError as err:
            try:
                if os.fstat(fd).st_size == 0:  # made just now: no file is left behind for a lock never taken
                    path.unlink()
            except OSError:
                pass
            os.close(fd)
            console.print(
                f"[yellow]warning:[/] {escape(str(path.parent))}: no file lock on this file system "
                f"({escape(str(err))}): another run on this folder at the same time is not refused",
                soft_wrap=True,
            )
            return None
        if _is_at(fd, path):
            break
        os.close(fd)  # the holder removed this file as it ended: lock the one at the path now
    started = time.strftime("%Y-%m-%d %H:%M:%S")
    try:
        os.ftruncate(fd, 0)
        os.write(fd, f"pid {os.getpid()} on host {socket.gethostname()}, since {started}\n".encode())
    except OSError:  # another user's file, left by a killed run: locked all the same, its text is stale
        pass
    return fd


def _lock_soon(fd: int) -> None:
    """An exclusive `flock` of FD, tried again for up to RETRY_SECONDS while it is refused (see there); then
    BlockingIOError. Any other OSError at once (no locks on this file system)."""
    deadline = time.monotonic() + RETRY_SECONDS
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.02)


def _open(path: Path) -> int:
    """PATH opened to lock and write, made if missing; read-only where it is another user's file (a run of theirs
    holds it, or a killed one left it): `flock` needs no write access."""
    try:
        return os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    except PermissionError:
        return os.open(path, os.O_RDONLY)


def _holder(fd: int) -> str:
    """The holder as its lock file names it (it writes itself in just after taking the lock: read again a little)."""
    for _ in range(20):
        text = os.pread(fd, 300, 0).decode(errors="replace").strip()
        if text:
            return text.splitlines()[0][:200]
        time.sleep(0.01)
    return "its pid and host not written yet"


def other_holder(path: Path) -> tuple[Path, str] | None:
    """(run folder, holder as its lock file names it) where PATH is, or lies inside, a run folder whose lock another
    process holds; None where the nearest lock file above PATH is free (a killed run's), this process's own (a
    run reading its own stages), or on a file system without `flock`; and where there is none.

    Only looks: a non-blocking shared `flock`, dropped at once, takes nothing from the holder."""
    for folder in (path, *path.parents):
        lock = folder / LOCK_FILE
        try:
            fd = os.open(lock, os.O_RDONLY)
        except OSError:  # none here (or not ours to read: a run of another user, which `flock` cannot ask)
            continue
        try:
            if lock.resolve() in _HELD:
                return None
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                return folder, _holder(fd)
            except OSError:  # no locks on this file system
                return None
            fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)
    return None


def _is_at(fd: int, path: Path) -> bool:
    """Whether FD is the file now at PATH (not one removed since it was opened)."""
    try:
        here, there = os.fstat(fd), os.stat(path)
    except FileNotFoundError:
        return False
    return (here.st_dev, here.st_ino) == (there.st_dev, there.st_ino)


def _release(fd: int, path: Path) -> None:
    """Remove the lock file while its lock is still held (no other run holds this file's lock, so none is using it),
    then drop the lock."""
    try:
        if _is_at(fd, path):
            path.unlink()
    except OSError:  # the run's outcome is the one to report; a file left is taken over by the next run
        pass
    finally:
        os.close(fd)
