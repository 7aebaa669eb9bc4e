"""Where the benchmark folder is: `--data-dir`, else `../shared/data/bench` seen from the cwd or the checkout.

The default was resolved against the cwd only, so a probe started from anywhere but the repo root found no
folder and silently ran without its contamination check and MATH500; now a missing folder is an error.
"""

from __future__ import annotations

from pathlib import Path

CWD_BENCH_DIR = Path("../shared/data/bench")
CHECKOUT_BENCH_DIR = Path(__file__).resolve().parents[2] / "shared" / "data" / "bench"


def find_bench_dir(data_dir: Path | None) -> Path:
    """DATA_DIR when given (it must be a folder), else the first default folder that exists.

    Raises:
        ValueError: naming the folder (or the default folders) that are not there.
    """
    if data_dir is not None:
        if not data_dir.is_dir():
            raise ValueError(f"benchmark folder not found: {data_dir} (--data-dir)")
        return data_dir
    for candidate in (CWD_BENCH_DIR, CHECKOUT_BENCH_DIR):
        if candidate.is_dir():
            return candidate
    raise ValueError(
        f"benchmark folder not found: neither {CWD_BENCH_DIR} (from the cwd) nor {CHECKOUT_BENCH_DIR} "
        "exists; pass --data-dir DIR"
    )
