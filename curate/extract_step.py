"""`MathAwareExtractor`: the datatrove step that turns documents whose `text` is HTML into math-aware text.

Never crashes, never hangs: each page runs in a worker process (datatrove's own `ExtractorSandbox`, the same
machinery as the stock extractors, its worker ignoring Ctrl-C, which the parent handles) that is killed and restarted when a page passes `timeout_s`, so even a hang
inside C code (HTML parser, regex engine) or a memory blow-up costs one document, not the job. Pages over
`max_bytes` are dropped before parsing, not truncated: a cut page loses its main content and its closing markup,
and pages that large are data dumps, not articles. A document that is already text (`content_type` text/plain: WET
`conversion` records) is not parsed as HTML, which would read `a<b and b>c` as a tag and join its lines: it gets
only the text pass (lines kept, TeX delimited, lone `$` escaped), in this process, since that pass is linear. `isolation="alarm"` runs in-process with a SIGALRM timer
instead (faster, but only interrupts Python code; falls back to no timer outside the main thread).
"""

from __future__ import annotations

import contextlib
import gc
import signal
import threading
from collections.abc import Iterator
from typing import Any

from datatrove.data import Document, DocumentsPipeline
from datatrove.pipeline.base import PipelineStep
from datatrove.pipeline.extractors.base import ExtractorSandbox

from curate.proc_guard import die_with_parent

DEFAULT_MAX_BYTES = 5_000_000
WORKER_GC_THRESHOLD = 10_000  # allocations between young-generation collections in the worker (Python's: 700)
PLAIN_TEXT = "text/plain"  # curate.readers.PLAIN_TEXT: the content type of a document that is text already
PLAIN_TEXT_EXTRACTOR = "plain-text"  # metadata["extractor"] of such a document


def _safe_extract(html: str, url: str | None, engine: str) -> tuple[str, str]:
    """Run `extract` and turn any exception into a result, so the worker process never dies on bad input."""
    from curate.extract import PageTooDeep, extract_strict

    try:
        return "ok", extract_strict(html, url=url, engine=engine)
    except (RecursionError, PageTooDeep):
        return "too_deep", ""
    except MemoryError:
        return "error", "out_of_memory"
    except Exception as e:  # noqa: BLE001 - bad pages must become a counted drop, whatever they raise
        return "error", f"{type(e).__name__}: {e}"[:300]


class _Sandbox(ExtractorSandbox):
    """datatrove's sandbox, whose worker leaves Ctrl-C to its parent: the terminal sends SIGINT to the whole process
    group, and the worker printed a KeyboardInterrupt traceback before the parent, which ends it, could say one line.

    Its worker also dies with its parent. A pool worker ended by the pool (SIGTERM: another task failed, or the
    run was killed) never ran the sandbox's cleanup, and its worker, waiting for pages that never came, stayed for
    good, holding the forkserver and the resource tracker alive after `mathmix` had exited.

    The worker is forked from a parent that holds the whole pipeline (datatrove, readers, the trafilatura module
    graph once imported): those objects are frozen, so the worker's collections never walk them (nor touch their
    copy-on-write pages), and the young generation is collected less often, since a page makes tens of thousands of
    short-lived DOM node objects. Measured: ~8% of the fast engine's time in a bench run after trafilatura's."""

    def _worker(self, conn, extract_fn):
        die_with_parent()
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        # SIGTERM ends it quietly: the sandbox terminates its worker at every normal end, and the handler inherited
        # from `mathmix` (SIGTERM as Ctrl-C) printed a KeyboardInterrupt traceback at the end of each run.
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        gc.freeze()
        gc.set_threshold(WORKER_GC_THRESHOLD, 10, 10)
        super()._worker(conn, extract_fn)


class _AlarmTimeout(BaseException):  # not Exception: _safe_extract must not swallow it
    pass


def _raise_timeout(signum, frame):  # pragma: no cover - called by the signal
    raise _AlarmTimeout()


def plain_text(text: str) -> str:
    """Text that never was HTML, as an extracted page's text: lines kept, TeX delimited, lone `$` escaped (as on a
    page with no TeX renderer), StackExchange's `$\\begingroup$` markers dropped as an extracted page's are."""
    from curate.dom_rewrite import strip_sentinels
    from curate.extract import drop_empty_groups
    from curate.extract_text import finalize_text

    text = strip_sentinels(text.replace("\r\n", "\n").replace("\r", "\n"))
    return drop_empty_groups(finalize_text(text, tex_page=False))


def html_size_bytes(html: str, limit: int) -> int:
    """Size of `html` in UTF-8 bytes, computed only when the char count cannot decide against `limit`."""
    n = len(html)
    if n > limit or n * 4 <= limit:
        return n
    return len(html.encode("utf-8", errors="replace"))


def as_text(raw: Any) -> str:
    """HTML as str: bytes are decoded as UTF-8 with replacement, lone surrogates replaced."""
    if isinstance(raw, bytes | bytearray):
        return bytes(raw).decode("utf-8", errors="replace")
    return str(raw)


class MathAwareExtractor(PipelineStep):
    """HTML documents -> text with `$...$`/`$$...$$` math; drops counted as `dropped_<reason>`.

    Args:
        engine: "fast" (resiliparse) or "clean" (trafilatura).
        timeout_s: per-document time limit in seconds.
        max_bytes: pages larger than this (UTF-8 bytes) are dropped as `too_large`.
        isolation: "process" (worker process, hard kill on timeout) or "alarm" (in-process SIGALRM).
    """

    name = "🧮 MathAwareExtractor"
    type = "🛢 - EXTRAC"

    def __init__(
        self,
        engine: str = "fast",
        timeout_s: float = 5.0,
        max_bytes: int = DEFAULT_MAX_BYTES,
        isolation: str = "process",
    ):
        super().__init__()
        if engine not in ("fast", "clean"):
            raise ValueError(f"engine must be fast or clean, got {engine!r}")
        if isolation not in ("process", "alarm"):
            raise ValueError(f"isolation must be process or alarm, got {isolation!r}")
        self.engine = engine
        self.timeout_s = timeout_s
        self.max_bytes = max_bytes
        self.isolation = isolation
        # Like BaseFilter's: when set (a datatrove writer), dropped pages are written with metadata["filter_reason"].
        self.exclusion_writer = None
        self._writer = None
        self._rank = 0

    def _drop(self, doc: Document, reason: str) -> None:
        self.stat_update(f"dropped_{reason}")
        if self._writer is not None:
            doc.metadata["filter_reason"] = reason
            self._writer.write(doc, self._rank)

    def _extract_job(self, html: str, url: str | None) -> tuple[str, str]:
        return _safe_extract(html, url, self.engine)

    def _finish(self, doc: Document, status: str, value: str) -> Document | None:
        if status != "ok":
            reasons = {"timeout": "extract_timeout", "too_deep": "too_deep"}
            self._drop(doc, reasons.get(status, "extract_error"))
            return None
        if not value.strip():
            self._drop(doc, "empty_text")
            return None
        doc.text = value
        is_text = doc.metadata.get("content_type") == PLAIN_TEXT
        doc.metadata["extractor"] = PLAIN_TEXT_EXTRACTOR if is_text else f"mathmix-{self.engine}"
        self.update_doc_stats(doc)
        return doc

    def _prepare(self, doc: Document) -> str | None:
        html = as_text(doc.text)
        if html_size_bytes(html, self.max_bytes) > self.max_bytes:
            self._drop(doc, "too_large")
            return None
        return html

    def run(self, data: DocumentsPipeline, rank: int = 0, world_size: int = 1) -> DocumentsPipeline:
        """Extract every document; yields the ones with text left."""
        self._rank = rank
        with self.exclusion_writer or contextlib.nullcontext() as writer:
            self._writer = writer
            try:
                if self.isolation == "alarm":
                    yield from self._run_alarm(data)
                else:
                    yield from self._run_process(data)
            finally:
                self._writer = None

    def _run_process(self, data: DocumentsPipeline) -> Iterator[Document]:
        with _Sandbox(timeout=self.timeout_s, warmup_text=("<p>warm up</p>", None)) as sandbox:
            for doc in data:
                with self.track_time():
                    html = self._prepare(doc)
                    if html is None:
                        continue
                    try:
                        if doc.metadata.get("content_type") == PLAIN_TEXT:
                            status, value = "ok", plain_text(html)
                        else:
                            status, value = sandbox.process_document(
                                (html, doc.metadata.get("url")), self._extract_job
                            )
                    except TimeoutError:
                        status, value = "timeout", ""
                    except EOFError:  # the worker died (killed for memory): counted, a new one starts
                        status, value = "error", "worker died"
                    out = self._finish(doc, status, value)
                if out is not None:
                    yield out

    def _run_alarm(self, data: DocumentsPipeline) -> Iterator[Document]:
        use_alarm = threading.current_thread() is threading.main_thread()
        old = signal.signal(signal.SIGALRM, _raise_timeout) if use_alarm else None
        try:
            for doc in data:
                with self.track_time():
                    html = self._prepare(doc)
                    if html is None:
                        continue
                    try:
                        if use_alarm:
                            signal.setitimer(signal.ITIMER_REAL, self.timeout_s)
                        if doc.metadata.get("content_type") == PLAIN_TEXT:
                            status, value = "ok", plain_text(html)
                        else:
                            status, value = _safe_extract(html, doc.metadata.get("url"), self.engine)
                    except _AlarmTimeout:
                        status, value = "timeout", ""
                    finally:
                        if use_alarm:
                            signal.setitimer(signal.ITIMER_REAL, 0)
                    out = self._finish(doc, status, value)
                if out is not None:
                    yield out
        finally:
            if use_alarm:
                signal.signal(signal.SIGALRM, old)
