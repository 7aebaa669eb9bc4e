"""Per-step metrics: `metrics.jsonl` in the stage folder (one object per step), optional TensorBoard, plots.

On resume the file is cut back to the checkpoint's step, so the curve of a killed-and-restarted run has each
step exactly once and reads like an uninterrupted one.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

METRICS_FILE = "metrics.jsonl"


def read_metrics(path: Path) -> list[dict[str, Any]]:
    """Rows of a metrics.jsonl file (a torn last line from a killed run is ignored)."""
    rows = []
    if path.exists():
        for line in path.read_text().splitlines():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return rows


class MetricsLogger:
    """Appends one JSON object per step; rank 0 only (other ranks get a logger that writes nothing)."""

    def __init__(self, stage_dir: Path, resume_step: int, enabled: bool, tensorboard: bool = False) -> None:
        self.path = stage_dir / METRICS_FILE
        self.enabled = enabled
        self.tb = None
        if not enabled:
            return
        stage_dir.mkdir(parents=True, exist_ok=True)
        kept = [r for r in read_metrics(self.path) if r["step"] <= resume_step]
        tmp = self.path.with_suffix(".jsonl.tmp")  # a kill mid-rewrite must not lose the earlier steps' rows
        tmp.write_text("".join(json.dumps(r) + "\n" for r in kept))
        tmp.replace(self.path)
        if tensorboard:
            from torch.utils.tensorboard import SummaryWriter  # needs the optional `tensorboard` package

            self.tb = SummaryWriter(str(stage_dir / "tensorboard"), purge_step=resume_step + 1)

    def log(self, row: dict[str, Any]) -> None:
        if not self.enabled:
            return
        with self.path.open("a") as f:
            f.write(json.dumps(row) + "\n")
        if self.tb is not None:
            for key, value in row.items():
                if isinstance(value, int | float) and key != "step":
                    self.tb.add_scalar(f"{row['stage']}/{key}", value, row["step"])

    def close(self) -> None:
        if self.tb is not None:
            self.tb.close()


def plot_run(run_dir: Path, out: Path) -> Path:
    """Loss and LR against tokens for every stage folder of a run (or one stage folder) -> PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    files = (
        [run_dir / METRICS_FILE]
        if (run_dir / METRICS_FILE).exists()
        else sorted(run_dir.glob(f"*/{METRICS_FILE}"))
    )
    if not files:
        raise FileNotFoundError(f"no {METRICS_FILE} in {run_dir} or its stage folders")
    fig, (ax_loss, ax_lr) = plt.subplots(2, 1, figsize=(8, 6), sharex=True)
    for path in files:
        rows = read_metrics(path)
        if not rows:
            continue
        # decay branches continue from where their start stage ended on the token axis
        x = [r.get("run_tokens", r["tokens"]) for r in rows]
        label = rows[0]["stage"]
        ax_loss.plot(x, [r["loss"] for r in rows], label=label)
        ax_lr.plot(x, [r["lr"] for r in rows], label=label)
    ax_loss.set_ylabel("loss")
    ax_loss.legend()
    ax_lr.set_ylabel("learning rate")
    ax_lr.set_xlabel("tokens")
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return out
