"""Tokenizers for sharding: load any Hugging Face tokenizer, or train a small byte-level BPE one.

Sharding runs the Rust `tokenizers.Tokenizer` behind a Hugging Face fast tokenizer directly (batch encoding without
offsets), since the Python wrapper costs throughput and adds nothing here; the EOS id comes from the HF config.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mathmix.cli_util import first_line

EOS, BOS, PAD = "<|endoftext|>", "<|begin_of_text|>", "<|pad|>"


@dataclass
class LoadedTokenizer:
    """A Rust tokenizer plus what sharding needs to know about it."""

    name: str
    backend: Any  # tokenizers.Tokenizer
    eos_id: int
    vocab_size: int

    @property
    def fingerprint(self) -> str:
        """sha256 (16 hex digits) of the serialized tokenizer: equal exactly when two tokenizers map text to the
        same ids, wherever their folders are (a vocabulary size alone does not tell two BPE models apart)."""
        import hashlib

        return hashlib.sha256(self.backend.to_str().encode()).hexdigest()[:16]

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        """Token ids of each text, without special tokens (the EOS is appended by the shard writer)."""
        return [e.ids for e in self.backend.encode_batch_fast(texts, add_special_tokens=False)]


def load_tokenizer(name_or_path: str | Path, eos_token: str | None = None) -> LoadedTokenizer:
    """Load a Hugging Face tokenizer from a local folder or a hub name (honours HF_HUB_OFFLINE).

    A local folder with tokenizer.json is read with `tokenizers` alone (importing transformers costs seconds in
    every datatrove worker); anything else goes through `transformers.AutoTokenizer`.

    Args:
        name_or_path: folder with tokenizer.json / tokenizer_config.json, or a hub name.
        eos_token: the token closing each document (default: the tokenizer's eos_token).

    Raises:
        ValueError: no such tokenizer, no fast (Rust) tokenizer, or no EOS token.
    """
    folder = Path(name_or_path)
    backend: Any
    if (folder / "tokenizer.json").is_file():
        from tokenizers import Tokenizer

        backend = Tokenizer.from_file(str(folder / "tokenizer.json"))
        eos = eos_token or _config_eos(folder)
        size = backend.get_vocab_size(with_added_tokens=True)
    else:
        from transformers import AutoTokenizer

        from mathmix.hub import from_pretrained

        if folder.is_dir() and not (folder / "tokenizer_config.json").is_file():
            raise ValueError(f"{folder}: no tokenizer.json or tokenizer_config.json in this folder")
        try:
            hf = from_pretrained(AutoTokenizer, name_or_path)
        except (OSError, ValueError) as err:  # not a folder, and no hub copy (cached, or reachable)
            raise ValueError(
                f"tokenizer not found: {name_or_path} is not a folder with tokenizer.json, and loading it as a "
                f"Hugging Face name failed ({first_line(err)})"
            ) from None
        backend = getattr(hf, "backend_tokenizer", None)
        if backend is None:
            raise ValueError(f"{name_or_path}: no fast tokenizer (tokenizer.json) to shard with")
        eos = eos_token or hf.eos_token
        size = max(backend.get_vocab_size(with_added_tokens=True), len(hf))
    eos_id = backend.token_to_id(eos) if eos else None
    if eos_id is None and eos_token:  # "pass --eos-token" would not help: it was passed
        raise ValueError(f"{name_or_path}: the EOS token given, {eos_token!r}, is not in its vocabulary")
    if eos_id is None:
        raise ValueError(f"{name_or_path}: no EOS token (got {eos!r}); pass --eos-token")
    # A folder is recorded by its absolute path: manifests are read from other working directories.
    name = str(folder.resolve()) if folder.is_dir() else str(name_or_path)
    return LoadedTokenizer(name, backend, int(eos_id), int(size))


def _config_eos(folder: Path) -> str | None:
    """eos_token from tokenizer_config.json or special_tokens_map.json (a string or {"content": ...})."""
    import json

    for name in ("tokenizer_config.json", "special_tokens_map.json"):
        path = folder / name
        if path.is_file():
            eos = json.loads(path.read_text()).get("eos_token")
            if isinstance(eos, dict):
                eos = eos.get("content")
            if eos:
                return eos
    return None


def train_tokenizer(
    texts: Iterable[str], out_dir: str | Path, vocab_size: int = 2048, min_frequency: int = 2
) -> Path:
    """Train a byte-level BPE tokenizer and save it as a Hugging Face tokenizer folder.

    Digits are split one by one (numbers tokenize consistently, which matters for math). The folder loads with
    `transformers.AutoTokenizer` and has eos/bos/pad tokens.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    minimum = 256 + 3  # the byte alphabet and the three special tokens
    if vocab_size < minimum:
        raise ValueError(
            f"vocab_size must be at least {minimum} (256 bytes + 3 special tokens), got {vocab_size}"
        )
    seen = 0

    def counted() -> Iterator[str]:
        nonlocal seen
        for text in texts:
            seen += 1
            yield text

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Digits(individual_digits=True), pre_tokenizers.ByteLevel(add_prefix_space=False)]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=[EOS, BOS, PAD],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(counted(), trainer=trainer)
    if not seen:
        raise ValueError("no text to train a tokenizer on (no document with a non-empty text field)")
    hf = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=EOS, bos_token=BOS, pad_token=PAD)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    hf.save_pretrained(str(out))
    return out


def iter_texts(
    paths: Iterable[str | Path],
    limit: int | None = None,
    text_key: str = "text",
    skipped: dict[str, int] | None = None,
) -> Iterator[str]:
    """Texts from Parquet/JSONL files or folders of them (for tokenizer training and benchmarks).

    A JSONL row whose text is not a string (`"text": 5`, a list) is skipped and counted in `skipped["bad_record"]`
    (`shards build` drops such rows as bad_record too); a Parquet `text` column that holds no strings is an error
    naming the file and its type.
    """
    import json

    import pyarrow.parquet as pq

    n = 0
    for path in corpus_files(paths):
        if path.suffix == ".parquet":
            try:
                parquet = pq.ParquetFile(path)
            except (OSError, ValueError) as err:  # a damaged file: named, not pyarrow's bare message
                raise ValueError(f"{path}: not a readable Parquet file ({first_line(err)})") from None
            if text_key not in parquet.schema_arrow.names:
                raise ValueError(
                    f"{path}: no `{text_key}` column (columns: {', '.join(parquet.schema_arrow.names)})"
                )
            kind = parquet.schema_arrow.field(text_key).type
            if not _is_text_type(kind):
                raise ValueError(f"{path}: the `{text_key}` column holds {kind}, not text")
            for batch in parquet.iter_batches(columns=[text_key], batch_size=1024):
                texts = batch.column(0).to_pylist()
                for text in texts:
                    if text:
                        yield text
                        n += 1
                        if limit and n >= limit:
                            return
            continue
        opener = _open_text(path)
        with opener as f:
            for line_no, line in enumerate(f, 1):
                try:
                    row = json.loads(line) if line.strip() else None
                except ValueError:
                    raise ValueError(f"{path}:{line_no}: not valid JSON") from None
                text = row.get(text_key) if isinstance(row, dict) else None
                if text is not None and not isinstance(text, str):  # a number or a list: no text to learn
                    if skipped is not None:
                        skipped["bad_record"] = skipped.get("bad_record", 0) + 1
                    continue
                if text:
                    yield text
                    n += 1
                    if limit and n >= limit:
                        return


def _is_text_type(kind: Any) -> bool:
    """Whether a Parquet column of Arrow type `kind` reads as text: string, large_string, string_view, null (all
    rows missing), or a dictionary of strings (a pandas categorical column) -- what `shards build` reads as text."""
    import pyarrow as pa

    if pa.types.is_dictionary(kind):
        kind = kind.value_type
    is_view = getattr(pa.types, "is_string_view", None)  # pyarrow >= 16
    return bool(
        pa.types.is_string(kind)
        or pa.types.is_large_string(kind)
        or pa.types.is_null(kind)
        or (is_view is not None and is_view(kind))
    )


CORPUS_SUFFIXES = (".parquet", ".jsonl", ".jsonl.gz", ".json.gz", ".jsonl.zst")


def corpus_files(paths: Iterable[str | Path]) -> list[Path]:
    """Parquet/JSONL files named by `paths` (files, or folders searched recursively; a stage folder: its data/),
    sorted per folder."""
    from mathmix.paths import stage_data, unique_files

    files: list[Path] = []
    for raw in paths:
        p = stage_data(raw)
        if p.is_dir():
            files.extend(sorted(f for f in p.rglob("*") if f.is_file() and f.name.endswith(CORPUS_SUFFIXES)))
        elif p.is_file():
            files.append(p)
        else:
            raise FileNotFoundError(f"{p}: no such corpus file or folder")
    return unique_files(files)


def _open_text(path: Path):
    if path.name.endswith(".gz"):
        import gzip

        return gzip.open(path, "rt", encoding="utf-8")
    return open(path, encoding="utf-8")
