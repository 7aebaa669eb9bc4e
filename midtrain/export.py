"""Export a training checkpoint (DCP folder) as a plain Hugging Face model folder.

The checkpoint carries the model's `config.json` and the tokenizer's source path, so the export needs nothing
but the checkpoint; the output is safetensors + config + tokenizer, what transformers and vLLM load.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import torch

from mathmix.cli_util import first_line
from mathmix.hub import from_pretrained
from midtrain.checkpoint import STATE_FILE, list_checkpoints, load_model_weights


def resolve_checkpoint(path: Path) -> Path:
    """A checkpoint folder itself, or the latest checkpoint of a stage folder / its `checkpoints/` folder."""
    if (path / STATE_FILE).exists():
        return path
    for folder in (path, path / "checkpoints"):
        found = list_checkpoints(folder)
        if found:
            return found[-1]
    raise FileNotFoundError(f"{path}: not a checkpoint, nor a stage folder with checkpoints")


def load_tokenizer(source: str, eos_token_id: int | None):
    """A transformers tokenizer from a HF folder, a cached hub name, or a `tokenizers` tokenizer.json file."""
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    path = Path(source)
    if not path.is_file():  # a HF folder (or a hub name already in the local cache)
        return from_pretrained(AutoTokenizer, source)
    tok = PreTrainedTokenizerFast(tokenizer_file=str(path))
    if eos_token_id is not None:
        tok.eos_token = tok.convert_ids_to_tokens(eos_token_id)
    return tok


def tokenizer_fingerprint(source: str, loaded=None) -> str | None:
    """The fingerprint `shards build` records as a manifest's `tokenizer_sha256` (shards.tokenizer
    `LoadedTokenizer.fingerprint`), computed the way it loads the tokenizer: a tokenizer.json (a file, or in a
    folder) with `tokenizers`, anything else (a hub name) through transformers (`loaded`, if already loaded).
    None where there is no fast tokenizer to fingerprint."""
    from shards.tokenizer import LoadedTokenizer

    path = Path(source)
    file = path if path.is_file() else path / "tokenizer.json"
    if file.is_file():
        from tokenizers import Tokenizer

        backend: Any = Tokenizer.from_file(str(file))
    else:
        backend = getattr(
            loaded if loaded is not None else load_tokenizer(source, None), "backend_tokenizer", None
        )
        if backend is None:
            return None
    return LoadedTokenizer(str(source), backend, eos_id=0, vocab_size=0).fingerprint


EXPORT_FILE = "export.json"  # what `mathmix train export` records of an export, with the files it wrote


def check_export_dir(out_dir: Path, checkpoint: Path) -> list[str]:
    """Refuse (ValueError) an OUT_DIR that an export of CHECKPOINT may not write into; returns the files of a
    previous export there to replace (`export_checkpoint`'s `replace`).

    An export wrote into any folder, a corpus or shard folder included (config.json and model.safetensors among
    its .bin/.idx files). Allowed: a new or empty folder, or a previous export of the same stage (its export.json
    names a checkpoint of the same checkpoints folder) holding only the files that export wrote. Nor may OUT_DIR
    lie inside the checkpoint (pruning old checkpoints would delete it)."""
    from pipelines.job_record import check_output_outside_inputs, foreign_files

    if out_dir.exists() and not out_dir.is_dir():
        raise ValueError(f"{out_dir}: exists and is not a folder; -o names the output folder")
    check_output_outside_inputs(out_dir, [checkpoint], what="checkpoint")
    if not out_dir.is_dir() or not any(out_dir.iterdir()):
        return []
    try:
        record = json.loads((out_dir / EXPORT_FILE).read_text())
    except (OSError, ValueError):
        record = None
    if not isinstance(record, dict) or not isinstance(record.get("files"), list):
        names = sorted(p.name for p in out_dir.iterdir())
        raise ValueError(
            f"{out_dir}: holds files not written by train export ({', '.join(names[:5])}"
            f"{', ...' if len(names) > 5 else ''}); export to a new or empty folder"
        )
    previous = _recorded_checkpoint(record, out_dir)
    folder = checkpoint.resolve().parent
    if previous.is_absolute():
        same = previous.resolve().parent == folder
    elif (Path.cwd() / previous).resolve().parent == folder:
        same = True  # as earlier versions read it: relative to the folder this export runs in
    else:  # where it was exported from is unknown: the same stage if its folder ends as the recorded path's does,
        # the stage's own folder included (`checkpoints/` alone ends every stage's)
        tail = [p for p in Path(os.path.normpath(previous.parent)).parts if p != ".."]
        same = len(tail) >= 2 and list(folder.parts[-len(tail) :]) == tail
    if not same:
        raise ValueError(
            f"{out_dir}: holds an export of {previous}, another stage than {checkpoint}; export to a new folder"
        )
    files = [str(f) for f in record["files"]]
    others = foreign_files(out_dir, {*files, EXPORT_FILE})
    if others:
        raise ValueError(
            f"{out_dir}: holds files not written by train export ({', '.join(others[:5])}"
            f"{', ...' if len(others) > 5 else ''}); export to a new or empty folder"
        )
    return files


def _recorded_checkpoint(record: dict[str, Any], out_dir: Path) -> Path:
    """The checkpoint an export.json names, absolute where it can be told. Earlier exports recorded the path as
    typed, relative to the folder they ran in (read against today's working folder, a re-export of the same stage
    from another folder was refused as another stage's): that folder is OUT_DIR now less the `-o` recorded with
    it, where that was relative too and still ends OUT_DIR. Else the relative path as recorded."""
    previous = Path(str(record.get("checkpoint")))
    if previous.is_absolute() or not isinstance(record.get("out_dir"), str):
        return previous
    typed = Path(os.path.normpath(record["out_dir"]))
    here = Path(os.path.abspath(out_dir))
    n = len(typed.parts)
    if typed.is_absolute() or ".." in typed.parts or here.parts[len(here.parts) - n :] != typed.parts:
        return previous
    base = here.parents[n - 1] if n else here
    return base / previous if (base / previous).exists() else previous


def export_checkpoint(
    checkpoint: Path,
    out_dir: Path,
    tokenizer: str | None = None,
    dtype: str = "bfloat16",
    replace: list[str] | None = None,
) -> dict[str, Any]:
    """Write OUT_DIR as a Hugging Face model folder; return what was written.

    The tokenizer and the weights are loaded before anything is written, so a failure (ValueError naming the
    input) leaves no half-written folder behind. `replace`: files of a previous export in OUT_DIR
    (`check_export_dir`), removed before writing, so that none of its files (another tokenizer's) is left."""
    from transformers import AutoConfig, AutoModelForCausalLM

    path = resolve_checkpoint(Path(checkpoint))
    state = json.loads((path / STATE_FILE).read_text())
    config = AutoConfig.from_pretrained(str(path))
    source = tokenizer or state.get("tokenizer")
    tok, warning = None, None
    if source:
        try:
            tok = load_tokenizer(source, config.eos_token_id)
        except (OSError, ValueError) as err:
            raise ValueError(
                f"tokenizer {source}: cannot be loaded ({first_line(err)}); pass --tokenizer"
            ) from None
        warning = check_export_tokenizer(path, state, source, tokenizer_fingerprint(source, tok))
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    load_model_weights(path, model)
    model = model.to(getattr(torch, dtype))
    model.config.use_cache = True  # training turns the KV cache off; generation wants it on
    if getattr(model, "generation_config", None) is not None:  # generate() reads this copy (it recomputed the
        model.generation_config.use_cache = True  # whole prefix for every new token)
    if out_dir.exists() and not out_dir.is_dir():
        raise ValueError(f"{out_dir}: exists and is not a folder")
    out_dir.mkdir(parents=True, exist_ok=True)
    for name in replace or []:
        if (out_dir / name).is_file() and Path(name).name == name:  # a plain name in OUT_DIR, never a path
            (out_dir / name).unlink()
    model.save_pretrained(str(out_dir), safe_serialization=True)
    if tok is not None:
        tok.save_pretrained(str(out_dir))
    # resolved: recorded as typed, a re-export of the stage from another folder read it against that folder
    return {
        "checkpoint": str(path.resolve()),
        "out_dir": str(out_dir),
        "stage": state.get("stage"),
        "step": state.get("step"),
        "tokens": state.get("run_tokens"),
        "dtype": dtype,
        "tokenizer": source,
        **({"warning": warning} if warning else {}),
        "files": sorted(p.name for p in out_dir.iterdir() if p.name != EXPORT_FILE),
    }


def check_export_tokenizer(
    path: Path, state: dict[str, Any], source: str, fingerprint: str | None
) -> str | None:
    """Refuse (ValueError) a tokenizer whose fingerprint differs from the one the checkpoint records it was trained
    with: the export would decode the model's ids as other tokens. A checkpoint from before fingerprints were
    recorded cannot be checked: a warning (returned) says so when another tokenizer than its own is given."""
    trained = state.get("tokenizer_sha256")
    if trained and fingerprint and fingerprint != trained:
        raise ValueError(
            f"tokenizer {source} (fingerprint {fingerprint}) is not the one {path} was trained with "
            f"({state.get('tokenizer')}, fingerprint {trained}): its token ids would mean other tokens; pass "
            "that tokenizer (or one with the same fingerprint) as --tokenizer"
        )
    if trained and fingerprint is None:
        return f"tokenizer {source}: not a fast tokenizer, so not checked against the one {path} was trained with"
    if not trained and source != state.get("tokenizer"):
        return (
            f"{path} records no tokenizer fingerprint (written before they were recorded): not checked that "
            f"{source} is the tokenizer it was trained with ({state.get('tokenizer')})"
        )
    return None
