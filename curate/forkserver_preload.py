"""Imported only by the `multiprocess` forkserver of a local stage's pool (see `curate.proc_guard.use_guarded_forkserver`):
importing it sets the forkserver up, before the forkserver saves the signal handlers its pool workers get.
Imported anywhere else it does nothing."""

from curate.proc_guard import setup_forkserver

setup_forkserver()
