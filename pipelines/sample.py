"""The quickstart's sample: pages written here (MathJax, KaTeX, MathML, Wikipedia math, formula images, plain
non-math pages with `$` prices), packed into a WARC at run time with warcio, plus tiny benchmark files.

Everything is generated from templates with a fixed seed, so the sample is the same on every machine and nothing is
downloaded. It also plants what later stages must catch: near-duplicate pages, a page with a benchmark problem
pasted in, and bad records (empty, binary labelled text/html, an image).
"""

from __future__ import annotations

import hashlib
import io
import json
import random
import uuid
from pathlib import Path

from pipelines.sample_pages import MATH_TOPICS, NONMATH_TOPICS, math_page, nonmath_page, word_problems


def _write_jsonl(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))


def write_benchmarks(out: Path, rng: random.Random) -> dict[str, list[dict]]:
    """GSM8K-, MATH500- and MATH-style files with the shared data's field names."""
    problems = word_problems(rng, 40)
    gsm = [{"question": p["question"], "answer": f"{p['steps']}\n#### {p['answer']}"} for p in problems]
    maths = []
    for i in range(40):
        a, b = rng.randint(2, 9), rng.randint(10, 99)
        maths.append(
            {
                "problem": f"Solve for $x$: ${a}x + {b} = {a * 7 + b}$.",
                "solution": f"Subtract ${b}$ from both sides to get ${a}x = {a * 7}$, then divide by ${a}$: "
                f"$x = \\boxed{{7}}$.",
                "answer": "7",
                "level": f"Level {1 + i % 5}",
                "type": "Algebra",
            }
        )
        maths[-1]["unique_id"] = f"sample/algebra/{i}.json"
    _write_jsonl(out / "bench" / "gsm8k" / "train.jsonl", gsm[:30])
    _write_jsonl(out / "bench" / "gsm8k" / "test.jsonl", gsm[30:])
    _write_jsonl(
        out / "bench" / "math" / "train.jsonl",
        [{k: m[k] for k in ("problem", "solution")} for m in maths[:30]],
    )
    _write_jsonl(out / "bench" / "math500" / "test.jsonl", maths[30:])
    prompts = [{"prompt": m["problem"], "answer": m["answer"]} for m in maths[:24]]
    _write_jsonl(out / "rl_prompts.jsonl", prompts)
    return {"gsm8k_test": gsm[30:], "math500": maths[30:]}


def write_pages(out: Path, rng: random.Random, contaminant: str) -> list[tuple[str, str, bytes, str]]:
    """HTML pages under OUT/html/{math,nonmath}/; returns (url, kind, body, content type) for the WARC."""
    records = []
    for i, topic in enumerate(MATH_TOPICS):
        html = math_page(topic, i, rng)
        records.append(
            (f"https://math.example.edu/notes/{topic['slug']}", "math", html, "text/html; charset=utf-8")
        )
    # Near-duplicates (a mirror with a changed footer) and a page with a benchmark problem pasted in.
    base = records[0][2].decode()
    records.append(
        (
            "https://mirror.example.net/notes/copy",
            "math",
            base.replace("</body>", "<p>Mirrored.</p></body>").encode(),
            "text/html",
        )
    )
    records.append(("https://math.example.edu/notes/copy2", "math", base.encode(), "text/html"))
    pasted = (
        math_page(MATH_TOPICS[1], 99, rng).decode().replace("</article>", f"<p>{contaminant}</p></article>")
    )
    records.append(("https://forum.example.org/t/homework-help", "math", pasted.encode(), "text/html"))
    for i, topic in enumerate(NONMATH_TOPICS):
        html = nonmath_page(topic, i, rng)
        records.append(
            (f"https://news.example.com/{topic['slug']}", "nonmath", html, "text/html; charset=utf-8")
        )
    for url, kind, body, _ in records:
        name = url.split("//", 1)[1].replace("/", "__").replace(".", "_") + ".html"
        path = out / "html" / kind / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(body)
    return records


def record_id(seed: int, index: int, url: str) -> str:
    """The WARC-Record-ID of the sample's INDEX-th record: a UUID from the seed, the place and the URL, the same on
    every machine (warcio's own is a random uuid4: every fresh quickstart gave every document another id)."""
    digest = hashlib.sha256(f"mathmix-sample:{seed}:{index}:{url}".encode()).digest()
    return f"<urn:uuid:{uuid.UUID(bytes=digest[:16], version=4)}>"


def write_warc(path: Path, records: list[tuple[str, str, bytes, str]], seed: int = 0) -> int:
    """Pack the pages plus three bad records into a gzipped WARC; returns the number of response records.
    Record ids come from SEED and each record's URL (`record_id`)."""
    from warcio.statusandheaders import StatusAndHeaders
    from warcio.warcwriter import WARCWriter

    bad = [
        ("https://bad.example.com/empty", "", b"", "text/html"),
        ("https://bad.example.com/binary", "", b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 8, "text/html"),
        ("https://bad.example.com/logo.png", "", b"\x89PNG\r\n\x1a\n" + bytes(64), "image/png"),
    ]
    with path.open("wb") as handle:
        writer = WARCWriter(handle, gzip=True)
        for i, (url, _, body, ctype) in enumerate(records + bad):
            http = StatusAndHeaders("200 OK", [("Content-Type", ctype)], protocol="HTTP/1.1")
            date = f"2024-05-{1 + i % 28:02d}T12:00:00Z"
            record = writer.create_warc_record(
                url,
                "response",
                payload=io.BytesIO(body),
                http_headers=http,
                warc_headers_dict={"WARC-Date": date, "WARC-Record-ID": record_id(seed, i, url)},
            )
            writer.write_record(record)
    return len(records) + len(bad)


def write_sample(out: Path, seed: int = 0) -> dict:
    """Write the whole sample under OUT (default RUN/sample); returns counts for the quickstart's report."""
    rng = random.Random(seed)
    out.mkdir(parents=True, exist_ok=True)
    bench = write_benchmarks(out, rng)
    contaminant = bench["math500"][0]["problem"] + " " + bench["math500"][0]["solution"]
    records = write_pages(out, rng, contaminant)
    n = write_warc(out / "pages.warc.gz", records, seed)
    counts = {
        "warc_records": n,
        "math_pages": sum(r[1] == "math" for r in records),
        "nonmath_pages": sum(r[1] == "nonmath" for r in records),
    }
    (out / "sample.json").write_text(json.dumps(counts, indent=2) + "\n")
    return counts
