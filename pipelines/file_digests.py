"""What a job record says of the files a job reads: their sizes (`input_size`) and digests of their contents
(`file_digest`, `weights_digest` for a model folder, `yaml_digest` for what a YAML file says).

Apart from `job_record` because these read files only; the record's rules (what is the same job) are there.
"""

from __future__ import annotations

import json
from pathlib import Path


def input_size(path: str | Path) -> int | list[int] | None:
    """Bytes of a file; [files, bytes] of the files under a folder (a stage folder: its data/); None if missing.

    Sizes, not hashes or times: cheap on any corpus, unchanged by copying a run folder, and a different corpus
    at the same path is all but certain to differ in size.
    """
    from mathmix.paths import StageFoldersInside, stage_data

    try:
        path = stage_data(path)
    except StageFoldersInside:  # refused by the reader that follows: not worth walking a whole run folder
        return None
    if path.is_file():
        return path.stat().st_size
    if path.is_dir():
        sizes = [f.stat().st_size for f in path.rglob("*") if f.is_file()]
        return [len(sizes), sum(sizes)]
    return None


def weights_digest(folder: str | Path) -> str | None:
    """A digest of a model folder's weights: each weight file's name and size and 1 MiB from its start, middle and
    end (None for no local folder).

    Sizes alone miss a model retrained or re-exported into the same folder (same shapes, same bytes); reading every
    byte of a 16 GB model on each eval would cost more than it saves. New weights differ in every sampled block.
    """
    import hashlib

    folder = Path(folder)
    if not folder.is_dir():
        return None
    digest = hashlib.sha256()
    block = 1 << 20
    for path in sorted(folder.iterdir()):
        if not path.is_file() or path.suffix not in (".safetensors", ".bin", ".pt", ".pth", ".gguf"):
            continue
        size = path.stat().st_size
        digest.update(f"{path.name}:{size}".encode())
        with path.open("rb") as handle:
            for at in sorted({0, max(0, size // 2 - block // 2), max(0, size - block)}):
                handle.seek(at)
                digest.update(handle.read(block))
    return digest.hexdigest()[:16]


def file_digest(path: str | Path) -> str | None:
    """`SIZE:SHA` of a file a job reads besides its inputs (a model, a blocklist, a benchmark); None if missing.

    Sizes alone miss a model retrained into the same file or a list edited in place. Files up to 64 MiB are
    hashed whole; a larger one (a fastText model of GBs) by its size and 1 MiB from its start, middle and end.
    """
    import hashlib

    path = Path(path)
    if not path.is_file():
        return None
    size, block = path.stat().st_size, 1 << 20
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        if size <= 64 * block:
            for chunk in iter(lambda: handle.read(block), b""):
                digest.update(chunk)
        else:
            for at in (0, size // 2 - block // 2, size - block):
                handle.seek(at)
                digest.update(handle.read(block))
    return f"{size}:{digest.hexdigest()[:16]}"


def yaml_digest(path: str | Path) -> str | None:
    """`yaml:SHA` of what a YAML file a job reads says (a train recipe, a mixture): its parsed contents, so a
    comment or the layout edited is not another job, as a `mathmix run` recipe's own comments are not (the shipped
    train recipes' comments are edited). A file that is not valid YAML is digested by its bytes (`file_digest`);
    None if missing."""
    import hashlib

    from mathmix.yaml_files import load_yaml

    path = Path(path)
    if not path.is_file():
        return None
    try:
        said = load_yaml(path.read_text(encoding="utf-8"), path)
    except (OSError, ValueError):  # UnicodeDecodeError included
        return file_digest(path)
    canonical = json.dumps(said, sort_keys=True, ensure_ascii=False, default=str)
    return f"yaml:{hashlib.sha256(canonical.encode()).hexdigest()[:16]}"
