"""Ids shared by more than one input document of dedup, found so that the stage can warn about them.

Ids are never changed (docs/dedup.md), so two documents with one id stay two documents, but clusters.jsonl and
rejects name documents by id: "removed: orig0" while another orig0 survives reads as a lost document. The stage's
first job records a 64-bit hash of every id (WORK/ids/RANK.npy: 8 bytes a document, counted with numpy) and the
ids themselves (RANK.ids.jsonl), read only to name a few examples when some hash occurs twice.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np
from datatrove.pipeline.base import PipelineStep


def id_hash(doc_id: str) -> int:
    return int.from_bytes(
        hashlib.blake2b(doc_id.encode("utf-8", "surrogatepass"), digest_size=8).digest(), "little"
    )


class IdRecorder(PipelineStep):
    """Passes documents on unchanged; records each id's hash (and the id) for `duplicate_ids`."""

    type = "🫂 - DEDUP"
    name = "🪪 id recorder"

    def __init__(self, folder: str | Path):
        super().__init__()
        self.folder = Path(folder)

    def run(self, data, rank: int = 0, world_size: int = 1):
        self.folder.mkdir(parents=True, exist_ok=True)
        hashes: list[int] = []
        with open(self.folder / f"{rank:05d}.ids.jsonl", "w", encoding="utf-8") as names:
            for doc in data:
                hashes.append(id_hash(doc.id))
                names.write(json.dumps(doc.id, ensure_ascii=False) + "\n")
                yield doc
        np.save(self.folder / f"{rank:05d}.npy", np.array(hashes, dtype=np.uint64))


def duplicate_ids(folder: Path, examples: int = 5) -> dict[str, Any]:
    """{"ids": ids held by more than one document, "documents": how many documents hold them, "examples": the
    first few such ids, task by task}; {} when every id is unique."""
    parts = [np.load(path) for path in sorted(folder.glob("*.npy"))]
    if not parts:
        return {}
    values, counts = np.unique(np.concatenate(parts), return_counts=True)
    shared = set(values[counts > 1].tolist())
    if not shared:
        return {}
    names: list[str] = []
    for path in sorted(folder.glob("*.ids.jsonl")):
        with open(path, encoding="utf-8") as handle:
            for line in handle:
                name = json.loads(line)
                if id_hash(name) in shared and name not in names:
                    names.append(name)
                    if len(names) == examples:
                        break
        if len(names) == examples:
            break
    return {"ids": len(shared), "documents": int(counts[counts > 1].sum()), "examples": names}
