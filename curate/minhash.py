"""MinHash signatures, fast: numpy-vectorised hashing over batches of documents, no spaCy.

`MinhashSigner` turns texts into signatures: word/number/operator tokens (`curate.minhash_tokens`, numbers kept),
5-gram shingles (with n - 1 start and end markers, so a token at either end counts as much as one inside) hashed
by a rolling 64-bit hash, then K = bands x rows permutations `a*h + b mod 2^64` (odd `a`: a
bijection; its high bits are well mixed) evaluated as one (shingles x K) array per chunk and min-reduced per
document with `np.minimum.reduceat`. The top 32 bits of each minimum are the signature value.

`FastMinhashSignature` is the datatrove step: it writes datatrove's own signature files
(`bucket_XXX/RANK.minhash.sig`: per document `rows` uint32 hashes then the uint32 document index, sorted), so
datatrove's `MinhashDedupBuckets` reads them unchanged; it also writes `meta/RANK.npy` (per document index: score,
length, tokens outside drawings, a hash of its math tokens) for the cluster stage's keep rule and number guard,
and the shingle sets of the documents of at most `SHORT_DOC_TOKENS` tokens (`shingles/RANK.u32`: each document's
distinct shingles, uint32, sorted, concatenated; `shingles/RANK.sizes.npy`: int32 per document index, 0 = not
kept) with which the cluster stage confirms their candidate pairs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from datatrove.pipeline.base import PipelineStep

from curate.dedup_text import ngram_hashes
from curate.minhash_tokens import batch_token_hashes, batch_token_kinds, math_token_mask, multiset_hashes

# per document: keep-rule inputs (score, length), tokens (outside `[asy]` drawings) and an order-free hash of its
# math tokens (numbers, operators, one-letter variables: `curate.minhash_tokens.math_token_mask`): the cluster
# stage's number guard; whether it got a signature
META_DTYPE = np.dtype(
    [("score", "<f4"), ("length", "<u4"), ("has_sig", "u1"), ("n_tokens", "<u4"), ("num_hash", "<u8")]
)
# texts of at most this many tokens (problems, short pages) keep their shingle set (<= 2 KiB each) for the cluster
# stage, which confirms a candidate pair of two of them by its true Jaccard (`curate.minhash_cluster`)
SHORT_DOC_TOKENS = 512
# a drawing to its [/asy], or to the end of its paragraph without one (as curate.dedup_text.ASY_RE)
_ASY_RE = re.compile(r"\[asy\](?:(?:(?!\[asy\]).)*?\[/asy\]|.*?(?=\n[ \t]*\n|\Z))", re.S | re.I)
_CHUNK = 8192  # shingles per (K x chunk) block: 110 x 8192 x 4 B = 3.6 MB
_START, _END = np.uint64(0x5DEECE66D2F1A3B7), np.uint64(0xC2B2AE3D27D4EB4F)  # the markers around each text


@dataclass(frozen=True)
class MinhashSettings:
    """MinHash LSH parameters (MegaMath defaults: 5-gram shingles, 11 bands x 10 rows, threshold ~0.75)."""

    n_grams: int = 5
    num_buckets: int = 11
    hashes_per_bucket: int = 10
    seed: int = 1

    @property
    def num_hashes(self) -> int:
        return self.num_buckets * self.hashes_per_bucket

    @property
    def threshold(self) -> float:
        """The Jaccard at which a pair becomes an LSH candidate one time in two (0.756 for 11 x 10): the
        similarity the bands and rows are set for, and the one the cluster stage confirms short pairs at."""
        return float((1 - 0.5 ** (1 / self.num_buckets)) ** (1 / self.hashes_per_bucket))

    def datatrove_config(self):
        """The equivalent datatrove MinhashConfig (32-bit hashes), for its bucket stage."""
        from datatrove.pipeline.dedup.minhash import MinhashConfig
        from datatrove.utils.hashing import HashConfig

        return MinhashConfig(
            n_grams=self.n_grams,
            num_buckets=self.num_buckets,
            hashes_per_bucket=self.hashes_per_bucket,
            seed=self.seed,
            hash_config=HashConfig(precision=32),
        )


class MinhashSigner:
    """Computes MinHash signatures (uint32, one row of `num_hashes` per document) for batches of texts."""

    def __init__(self, settings: MinhashSettings | None = None):
        self.settings = settings or MinhashSettings()
        gen = np.random.RandomState(self.settings.seed)
        k = self.settings.num_hashes
        self.a = gen.randint(0, 2**31, size=k, dtype=np.uint32) * np.uint32(2) + np.uint32(1)
        self.b = gen.randint(0, 2**32, size=k, dtype=np.uint32)
        self._buf = np.empty((k, _CHUNK), dtype=np.uint32)

    def shingles(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """(concatenated shingle hashes, shingles per text) for a batch of texts."""
        return self._shingles(*batch_token_hashes(texts))

    def _shingles(self, hashes: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(shingle hashes, shingles per text): the n-grams of each text's tokens between n - 1 start and n - 1
        end markers, so that every token is in n shingles. Without the markers a token at either end was in one
        shingle only: `... the value of y` / `... the value of x` (12 tokens) shared 7 of 9 shingles (J 0.78,
        an LSH candidate one time in 1.6), with them 11 of 21 (J 0.52). A text with fewer tokens than n has none."""
        n = self.settings.n_grams
        pad = n - 1
        signed = counts >= n
        padded = np.where(signed, counts + 2 * pad, counts)
        p_ends = np.cumsum(padded)
        p_starts = p_ends - padded
        seq = np.empty(int(p_ends[-1]) if len(p_ends) else 0, dtype=np.uint64)
        doc_of = np.repeat(np.arange(len(counts)), counts)
        starts = np.cumsum(counts) - counts
        seq[np.arange(len(hashes)) - starts[doc_of] + p_starts[doc_of] + pad * signed[doc_of]] = hashes
        if pad:
            first = p_starts[signed]
            seq[(first[:, None] + np.arange(pad)).ravel()] = _START
            seq[(first[:, None] + (counts[signed] + pad)[:, None] + np.arange(pad)).ravel()] = _END
        all_grams = ngram_hashes(seq, n)  # n-grams across document borders are dropped below
        per_doc = np.where(signed, counts + pad, 0)
        offsets = np.cumsum(per_doc) - per_doc
        index = np.repeat(p_starts - offsets, per_doc) + np.arange(int(per_doc.sum()))
        return all_grams[index], per_doc

    def signatures(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """(signatures uint32 (len(texts), num_hashes), has_signature bool) for a batch of texts.

        A text with fewer tokens than one shingle has no signature (its row is all 0xFFFFFFFF).
        """
        sigs, has_sig, _, _ = self.signatures_and_numbers(texts)
        return sigs, has_sig

    def signatures_and_numbers(
        self, texts: list[str]
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(signatures, has_signature, tokens per text outside Asymptote `[asy]` drawings (the number guard's
        size), hash of each text's math tokens: numbers, operators and one-letter variables, in any order)."""
        sigs, has_sig, counts, num_hash, _ = self.sign(texts)
        return sigs, has_sig, counts, num_hash

    def sign(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, ShingleSets]:
        """`signatures_and_numbers` and the shingle sets of the texts of at most `SHORT_DOC_TOKENS` tokens."""
        hashes, counts, kinds = batch_token_kinds(texts)
        grams, per_doc = self._shingles(hashes, counts)
        sets = shingle_sets(grams, per_doc, counts <= SHORT_DOC_TOKENS)
        k = self.settings.num_hashes
        mins = np.full((len(texts), k), np.iinfo(np.uint32).max, dtype=np.uint32)
        doc_of = np.repeat(np.arange(len(texts)), per_doc)
        bounds = np.cumsum(per_doc) - per_doc
        for c0 in range(0, len(grams), _CHUNK):
            chunk = (grams[c0 : c0 + _CHUNK] >> np.uint64(32)).astype(np.uint32)
            # (K, chunk) layout: each permutation's row is contiguous, so multiply, add and the min-reduce
            # over each document's run of columns all stream through memory
            buf = self._buf[:, : len(chunk)]
            np.multiply(self.a[:, None], chunk[None, :], out=buf)
            buf += self.b[:, None]
            inner = bounds[(bounds > c0) & (bounds < c0 + len(chunk))] - c0
            cuts = np.unique(np.concatenate([[0], inner]))
            piece_min = np.minimum.reduceat(buf, cuts, axis=1).T
            docs = doc_of[c0 + cuts]
            mins[docs] = np.minimum(mins[docs], piece_min)
        num_hash = multiset_hashes(hashes, counts, math_token_mask(kinds))
        return mins, per_doc > 0, _tokens_outside_drawings(texts, counts), num_hash, sets


def _tokens_outside_drawings(texts: list[str], counts: np.ndarray) -> np.ndarray:
    """Tokens per text, those of Asymptote `[asy]...[/asy]` code left out: the number guard's size. A MATH problem
    with a drawing has 300-900 tokens, nearly all code (its statement: 18-77 of the 8 such problems merged with a
    problem whose numbers differ when their drawings were counted)."""
    with_asy = [i for i, t in enumerate(texts) if t and "[asy]" in t.lower()]  # _ASY_RE ignores case too
    if not with_asy:
        return counts
    out = counts.copy()
    out[with_asy] = batch_token_kinds([_ASY_RE.sub(" ", texts[i]) for i in with_asy])[1]
    return out


@dataclass(frozen=True)
class ShingleSets:
    """Per text: its distinct shingles (top 32 bits, sorted), concatenated; `sizes` 0 for a text not kept."""

    values: np.ndarray  # uint32
    sizes: np.ndarray  # int32, one per text


def shingle_sets(grams: np.ndarray, per_doc: np.ndarray, keep: np.ndarray) -> ShingleSets:
    """The distinct shingles of the texts where `keep` (a text without shingles gets size 0)."""
    kept = np.where(keep, per_doc, 0)
    sel = np.repeat(keep, per_doc)
    keys = np.repeat(np.arange(len(per_doc), dtype=np.uint64), kept) << np.uint64(32)
    keys = np.unique(keys | (grams[sel] >> np.uint64(32)))
    sizes = np.bincount((keys >> np.uint64(32)).astype(np.int64), minlength=len(per_doc)).astype(np.int32)
    return ShingleSets((keys & np.uint64(0xFFFFFFFF)).astype(np.uint32), sizes)


def _sig_dtype(rows: int) -> np.dtype:
    return np.dtype([(f"h{i}", "<u4") for i in range(rows)] + [("doc", "<u4")])


class FastMinhashSignature(PipelineStep):
    """MinHash stage 1: signatures in datatrove's file format, plus per-document score/length for the keep rule."""

    type = "🫂 - DEDUP"
    name = "🎯 MinHash signatures (numpy)"

    def __init__(
        self,
        output_folder: str | Path,
        settings: MinhashSettings | None = None,
        score_key: str = "math_score",
        batch_size: int = 256,
    ):
        super().__init__()
        self.output_folder = Path(output_folder)
        self.settings = settings or MinhashSettings()
        self.score_key = score_key
        self.batch_size = batch_size

    def _bucket_path(self, bucket: int, rank: int) -> Path:
        return self.output_folder / f"bucket_{bucket:03d}" / f"{rank:05d}.minhash.sig"

    def run(self, data, rank: int = 0, world_size: int = 1):
        signer = MinhashSigner(self.settings)
        rows, nb = self.settings.hashes_per_bucket, self.settings.num_buckets
        dtype = _sig_dtype(rows)
        for b in range(nb):
            self._bucket_path(b, rank).parent.mkdir(parents=True, exist_ok=True)
        files = [open(self._bucket_path(b, rank), "wb") for b in range(nb)]  # noqa: SIM115 (closed below)
        (self.output_folder / "shingles").mkdir(parents=True, exist_ok=True)
        files.append(open(self.output_folder / "shingles" / f"{rank:05d}.u32", "wb"))  # noqa: SIM115
        self._set_sizes: list[np.ndarray] = []
        meta: list[np.ndarray] = []
        batch: list = []
        try:
            for doc in data:
                batch.append(doc)
                if len(batch) >= self.batch_size:
                    meta.append(self._write_batch(signer, batch, sum(len(m) for m in meta), files, dtype))
                    batch = []
            if batch:
                meta.append(self._write_batch(signer, batch, sum(len(m) for m in meta), files, dtype))
        finally:
            for f in files:
                f.close()
        all_meta = np.concatenate(meta) if meta else np.empty(0, dtype=META_DTYPE)
        (self.output_folder / "meta").mkdir(parents=True, exist_ok=True)
        np.save(self.output_folder / "meta" / f"{rank:05d}.npy", all_meta)
        sizes = np.concatenate(self._set_sizes) if self._set_sizes else np.empty(0, dtype=np.int32)
        np.save(self.output_folder / "shingles" / f"{rank:05d}.sizes.npy", sizes)
        with self.track_time():
            for b in range(nb):
                _sort_sig_file(self._bucket_path(b, rank), dtype)

    def _write_batch(
        self, signer: MinhashSigner, batch: list, first_idx: int, files: list, dtype
    ) -> np.ndarray:
        with self.track_time():
            sigs, has_sig, n_tokens, num_hash, sets = signer.sign([d.text for d in batch])
            files[-1].write(sets.values.tobytes())  # shingle sets of the short documents
            self._set_sizes.append(sets.sizes)
            meta = np.zeros(len(batch), dtype=META_DTYPE)
            meta["n_tokens"], meta["num_hash"] = n_tokens, num_hash
            meta["score"] = [_score(d.metadata.get(self.score_key)) for d in batch]
            meta["length"] = [len(d.text or "") for d in batch]
            meta["has_sig"] = has_sig
            idx = np.nonzero(has_sig)[0]
            rows = self.settings.hashes_per_bucket
            for b, f in enumerate(files[:-1]):
                rec = np.empty(len(idx), dtype=dtype)
                for i in range(rows):
                    rec[f"h{i}"] = sigs[idx, b * rows + i]
                rec["doc"] = idx + first_idx
                f.write(rec.tobytes())
            self.stat_update("docs_signed", value=len(idx))
            if len(idx) < len(batch):
                self.stat_update("docs_too_short_for_minhash", value=len(batch) - len(idx))
        return meta


def _score(value) -> float:
    try:
        score = float(value)
    except (TypeError, ValueError):
        return float("-inf")
    return score if score == score else float("-inf")  # NaN -> no score


def _sort_sig_file(path: Path, dtype: np.dtype) -> None:
    """Sort a bucket file by (hashes..., doc) as datatrove's bucket stage requires."""
    records = np.fromfile(path, dtype=dtype)
    if not len(records):
        return
    order = np.lexsort([records[name] for name in reversed(dtype.names or ())])
    records[order].tofile(path)
