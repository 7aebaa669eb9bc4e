"""Tokenizers for sharding: load any Hugging Face tokenizer, or train a small byte-level BPE one.

Sharding runs the Rust `tokenizers.Tokenizer` behind a Hugging Face fast tokenizer directly (batch encoding without
offsets), since the Python wrapper costs throughput and adds nothing here; the EOS id comes from the HF config.
Corpus text is encoded as text (`for_encoding`): a control token written in it (`<|endoftext|>` on a web page) is
encoded as its characters, never as that token, and truncation or padding saved in a tokenizer.json is off.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mathmix.cli_util import first_line

EOS, BOS, PAD = "<|endoftext|>", "<|begin_of_text|>", "<|pad|>"
# The largest vocabulary `train_tokenizer` (and the recipe's `shards.vocab_size`) accepts: 2**20, about four times
# the largest real tokenizers (~256k), and well within the int32 token ids shards use past 65,500. The Rust BPE
# trainer sizes its tables from vocab_size: 10**11 asked for 4.5 TB and aborted the process with a backtrace.
MAX_VOCAB_SIZE = 1 << 20


@dataclass
class LoadedTokenizer:
    """A Rust tokenizer plus what sharding needs to know about it."""

    name: str
    backend: Any  # tokenizers.Tokenizer, as its files define it (fingerprinted, decodes)
    eos_id: int
    vocab_size: int
    eos_token: str | None = None  # the EOS token closing each document, as resolved
    default_eos: str | None = None  # the EOS its own files name (None: none)
    # `for_encoding(backend)`, made at the first `encode_batch` (a driver that only fingerprints makes none)
    encoder: Any = field(default=None, repr=False, compare=False)

    @property
    def fingerprint(self) -> str:
        """sha256 (16 hex digits) of the serialized tokenizer: equal exactly when two tokenizers map text to the
        same ids, wherever their folders are (a vocabulary size alone does not tell two BPE models apart)."""
        return fingerprint_of(self.backend)

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        """Token ids of each text as text (`for_encoding`): no template, no special token matched in the text,
        no truncation or padding (the EOS is appended by the shard writer, by id)."""
        if self.encoder is None:
            self.encoder = for_encoding(self.backend)
        return [e.ids for e in self.encoder.encode_batch_fast(texts, add_special_tokens=False)]


def for_encoding(backend: Any) -> Any:
    """A copy of the Rust tokenizer BACKEND that encodes corpus text as text.

    `add_special_tokens=False` only drops the template (BOS/EOS around each text): special tokens written in the
    text itself (`<|endoftext|>`, `<|begin_of_text|>` on a web page, in a chat log) were still matched and became
    those ids, an EOS in mid-document that the trainer's `--reset-attention-mask` splits the document at.
    `encode_special_tokens = True` encodes them as their characters, in `encode` and `encode_batch(_fast)` alike;
    added tokens that are not special (extra vocabulary) are still matched, as they are meant to be. Truncation
    and padding saved in a tokenizer.json (`Tokenizer.from_file` keeps them; transformers turns them off on load)
    would cut each document or fill it with pads: both off. A copy, so BACKEND, whose serialization is the
    fingerprint manifests record (truncation settings included), and a transformers tokenizer holding it, are
    left as they are.
    """
    from tokenizers import Tokenizer

    encoder = Tokenizer.from_str(backend.to_str())
    encoder.no_truncation()
    encoder.no_padding()
    encoder.encode_special_tokens = True  # not serialized: set on the copy itself
    return encoder


def special_ids(backend: Any) -> list[int]:
    """The ids of the Rust tokenizer BACKEND's special added tokens (EOS, BOS, pad, chat markers): what a document
    built by `shards build` holds only as its closing EOS."""
    return sorted(int(i) for i, token in backend.get_added_tokens_decoder().items() if token.special)


def open_tokenizer(name_or_path: str | Path) -> tuple[Any, str | None, int, str]:
    """(Rust tokenizer, its EOS token where its files name one, vocabulary size, the name to record) of a
    tokenizer.json file, a Hugging Face tokenizer folder or a hub name; no EOS is required (`inspect` decodes).
    The tokenizer is as its files define it (what `fingerprint_of` hashes, as `train` does): encode corpus text
    only through `for_encoding` of it (`LoadedTokenizer.encode_batch` does).

    A tokenizer.json (the file itself, or in a folder) is read with `tokenizers` alone (importing transformers costs
    seconds in every datatrove worker), as `train` reads a `model.tokenizer` file; a file's EOS comes from the
    tokenizer_config.json beside it, where it is named tokenizer.json. A path that exists is never looked up on
    the hub (transformers took a file path for a hub name and spent ~50 s retrying).

    Raises:
        ValueError: no such tokenizer, a file that is no tokenizer.json, no fast (Rust) tokenizer.
    """
    path = Path(name_or_path)
    backend: Any
    if path.is_file() or (path / "tokenizer.json").is_file():
        from tokenizers import Tokenizer

        file = path if path.is_file() else path / "tokenizer.json"
        try:
            backend = Tokenizer.from_file(str(file))
        except Exception as err:  # tokenizers raises a bare Exception for a file that is not its JSON
            raise ValueError(f"{file}: not a tokenizer.json file ({first_line(err)})") from None
        folder = path if path.is_dir() else path.parent
        eos = _config_eos(folder) if path.is_dir() or path.name == "tokenizer.json" else None
        size = backend.get_vocab_size(with_added_tokens=True)
        # A local tokenizer is recorded by its absolute path: manifests are read from other working directories.
        return backend, eos, int(size), str(path.resolve())
    from transformers import AutoTokenizer

    from mathmix.hub import from_pretrained

    if path.is_dir() and not (path / "tokenizer_config.json").is_file():
        raise ValueError(f"{path}: no tokenizer.json or tokenizer_config.json in this folder")
    try:
        hf = from_pretrained(AutoTokenizer, name_or_path)
    except (OSError, ValueError) as err:  # not a folder, and no hub copy (cached, or reachable)
        raise ValueError(
            f"tokenizer not found: {name_or_path} is not a tokenizer.json nor a folder with one, and loading it "
            f"as a Hugging Face name failed ({first_line(err)})"
        ) from None
    backend = getattr(hf, "backend_tokenizer", None)
    if backend is None:
        raise ValueError(f"{name_or_path}: no fast tokenizer (tokenizer.json) to shard with")
    size = max(backend.get_vocab_size(with_added_tokens=True), len(hf))
    return backend, hf.eos_token, int(size), str(path.resolve()) if path.is_dir() else str(name_or_path)


def load_tokenizer(name_or_path: str | Path, eos_token: str | None = None) -> LoadedTokenizer:
    """Load a tokenizer (`open_tokenizer`: a tokenizer.json file, a Hugging Face folder, or a hub name, the hub
    honouring HF_HUB_OFFLINE) with the EOS token that closes each document.

    Args:
        name_or_path: tokenizer.json, a folder with tokenizer.json / tokenizer_config.json, or a hub name.
        eos_token: the token closing each document (default: the tokenizer's eos_token).

    Raises:
        ValueError: no such tokenizer, no fast (Rust) tokenizer, or no EOS token.
    """
    backend, default_eos, size, name = open_tokenizer(name_or_path)
    eos = eos_token or default_eos
    eos_id = backend.token_to_id(eos) if eos else None
    if eos_id is None and eos_token:  # "pass --eos-token" would not help: it was passed
        raise ValueError(f"{name_or_path}: the EOS token given, {eos_token!r}, is not in its vocabulary")
    if eos_id is None:
        raise ValueError(f"{name_or_path}: no EOS token (got {eos!r}); pass --eos-token")
    return LoadedTokenizer(name, backend, int(eos_id), int(size), eos_token=eos, default_eos=default_eos)


def fingerprint_of(backend: Any) -> str:
    """`LoadedTokenizer.fingerprint` of a Rust tokenizer: what manifests record as `tokenizer_sha256`."""
    import hashlib

    return hashlib.sha256(backend.to_str().encode()).hexdigest()[:16]


def tokenizer_mismatch(
    source: str, fingerprint: str, built: dict[str, str], given: bool = True
) -> str | None:
    """Why tokenizer SOURCE (of FINGERPRINT) is not the one shards were built with (BUILT: {tokenizer_sha256: the
    tokenizer recorded with it}), or None: it is, or nothing records one (shards from before fingerprints were
    recorded). `given`: SOURCE was named by the user, not read from the manifest (whose path now holds another)."""
    if not built or fingerprint in built:
        return None
    recorded_print, recorded = next(iter(built.items()))
    if not given or (
        Path(source).exists()
        and Path(recorded).exists()
        and Path(source).resolve() == Path(recorded).resolve()
    ):
        return (
            f"tokenizer {source} has changed since these shards were built (fingerprint {fingerprint}, the "
            f"manifest records {recorded_print}): its ids would decode as other tokens; rebuild the shards, or put "
            "that tokenizer back"
        )
    return (
        f"tokenizer {source} (fingerprint {fingerprint}) is not the one these shards were built with "
        f"({recorded}, tokenizer_sha256 {recorded_print}): its ids would decode as other tokens; pass that "
        "tokenizer (or one with the same fingerprint)"
    )


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
    if vocab_size > MAX_VOCAB_SIZE:
        raise ValueError(
            f"vocab_size must be at most {MAX_VOCAB_SIZE:,} (about four times the largest real tokenizers; the "
            f"trainer allocates tables by it), got {vocab_size:,}"
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
    skipped: dict[str, Any] | None = None,
) -> Iterator[str]:
    """Texts from Parquet/JSONL files or folders of them (for tokenizer training and benchmarks).

    An empty or blank text is skipped (`shards build` drops it as empty_text). A JSONL line that is not a JSON
    object (not JSON, not UTF-8) or whose text is not a string (`"text": 5`, a list) or not UTF-8 text (a lone
    surrogate, `"\\ud800"`) is skipped and counted in `skipped["bad_record"]`, the first one's `FILE:LINE` in
    `skipped["first_bad_record"]`: `shards build` drops such rows as bad_record too. A JSONL file damaged part way
    (a truncated .gz) is read up to the damage and counted in `skipped["unreadable_files"]` (without SKIPPED: a
    ValueError naming it). A Parquet `text` column that holds no strings is an error naming the file and its type.
    """
    import json
    import zlib

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
                    if text and text.strip():  # blank: `shards build` drops it as empty_text
                        yield text
                        n += 1
                        if limit and n >= limit:
                            return
            continue
        try:
            with _open_binary(path) as f:
                for line_no, raw in enumerate(f, 1):
                    # decoded line by line, as `shards build` reads JSONL: one bad line does not end the file
                    try:
                        row = json.loads(raw.decode("utf-8")) if raw.strip() else ""
                    except ValueError:  # not UTF-8 (UnicodeDecodeError), not JSON
                        row = None
                    if row == "":  # a blank line is no row
                        continue
                    text = row.get(text_key) if isinstance(row, dict) else None
                    # not a JSON object, or a text that is a number or a list: `shards build` drops it as bad_record
                    # a lone surrogate ("\ud800", which json.loads accepts) is no UTF-8 text: the Rust trainer
                    # failed on it naming no line, and `shards build` drops it as bad_record too
                    if (
                        not isinstance(row, dict)
                        or (text is not None and not isinstance(text, str))
                        or (text and not _encodes(text))
                    ):
                        if skipped is not None:
                            skipped["bad_record"] = skipped.get("bad_record", 0) + 1
                            skipped.setdefault("first_bad_record", f"{path}:{line_no}")
                        continue
                    if text and text.strip():  # empty or blank: `shards build` drops it as empty_text
                        yield text
                        n += 1
                        if limit and n >= limit:
                            return
        except (
            OSError,
            EOFError,
            zlib.error,
        ) as err:  # a truncated .gz: read up to the damage, as `build` does
            if skipped is None:
                raise ValueError(f"{path}: unreadable ({first_line(err)})") from None
            skipped["unreadable_files"] = skipped.get("unreadable_files", 0) + 1
            skipped.setdefault("first_unreadable", f"{path} ({first_line(err)})")


def _encodes(text: str) -> bool:
    """Whether TEXT encodes as UTF-8 (a lone surrogate does not)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


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
    sorted per folder. A file named directly is read when it has one of CORPUS_SUFFIXES (as a folder's files are
    chosen) or its first line is a JSON object; ValueError for any other (a text or WARC file)."""
    from mathmix.paths import stage_data, unique_files

    files: list[Path] = []
    for raw in paths:
        p = stage_data(raw)
        if p.is_dir():
            files.extend(sorted(f for f in p.rglob("*") if f.is_file() and f.name.endswith(CORPUS_SUFFIXES)))
        elif p.is_file() and (p.name.endswith(CORPUS_SUFFIXES) or _starts_with_a_json_object(p)):
            # named directly: JSON lines under any name (corpus.json, .ndjson, a bare .gz) too
            files.append(p)
        elif p.is_file():  # read as JSONL, a text or WARC file made an empty, finished shard folder
            raise ValueError(
                f"{p}: not a corpus file: its first line is not a JSON object; shards read "
                f"{', '.join(CORPUS_SUFFIXES)} files, folders of them, and JSON-lines files named directly"
            )
        else:
            raise FileNotFoundError(f"{p}: no such corpus file or folder")
    return unique_files(files)


def _starts_with_a_json_object(path: Path) -> bool:
    """Whether the first non-blank line of PATH (decompressed as `shards build` reads it) is a JSON object."""
    import json

    try:
        with _open_binary(path) as f:
            for _ in range(100):
                line = f.readline(1 << 20)
                if not line:
                    return False
                if line.strip():
                    return isinstance(json.loads(line), dict)
    except (OSError, ValueError, EOFError):
        return False
    return False


def _open_binary(path: Path) -> Any:
    """PATH opened for reading bytes, decompressed by its first bytes (gzip, zstd) as `shards build`'s reader
    tells them, not by its name."""
    with open(path, "rb") as f:
        head = f.read(4)
    if head.startswith(b"\x1f\x8b"):
        import gzip

        return gzip.open(path, "rb")
    if head.startswith(b"\x28\xb5\x2f\xfd"):
        import io

        import zstandard

        return io.BufferedReader(zstandard.ZstdDecompressor().stream_reader(open(path, "rb"), closefd=True))
    return open(path, "rb")
