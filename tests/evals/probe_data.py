"""Inputs shared by the RL-probe tests: a prompt file with one MATH500 problem leaked into it, and a bench folder."""

from __future__ import annotations

import json
from pathlib import Path

LEAKED = (
    "Convert the point $(0,3)$ in rectangular coordinates to polar coordinates. Enter your answer in the form "
    "$(r,\\theta),$ where $r > 0$ and $0 \\le \\theta < 2 \\pi.$"
)


def write_jsonl(path: Path, records: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records))


def probe_inputs(tmp_path: Path) -> tuple[Path, Path]:
    prompts = tmp_path / "math8k.jsonl"
    write_jsonl(
        prompts,
        [{"prompt": f"What is {i} plus {i + 1}?", "answer": str(2 * i + 1)} for i in range(10)]
        + [{"prompt": LEAKED, "answer": "(3, \\frac{\\pi}{2})"}],
    )
    bench = tmp_path / "bench"
    write_jsonl(
        bench / "math500/test.jsonl",
        [
            {
                "problem": LEAKED,
                "solution": "\\boxed{(3,\\frac{\\pi}{2})}",
                "answer": "\\left( 3, \\frac{\\pi}{2} \\right)",
            },
            {"problem": "Compute 2 times 3.", "solution": "\\boxed{6}", "answer": "6"},
        ],
    )
    return prompts, bench
