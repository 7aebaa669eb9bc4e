"""The quickstart's sample is the same on every machine and every run: its WARC records' ids too (warcio gave each a
random uuid4, so every fresh quickstart gave every document another id)."""

from __future__ import annotations

from warcio.archiveiterator import ArchiveIterator

from pipelines.sample import write_sample


def _record_ids(warc) -> list[str]:
    with warc.open("rb") as handle:
        return [r.rec_headers.get_header("WARC-Record-ID") for r in ArchiveIterator(handle)]


def test_two_samples_have_the_same_record_ids(tmp_path):
    write_sample(tmp_path / "a")
    write_sample(tmp_path / "b")
    ids = _record_ids(tmp_path / "a" / "pages.warc.gz")
    assert ids == _record_ids(tmp_path / "b" / "pages.warc.gz")
    assert len(set(ids)) == len(ids) > 3  # one per record, the bad ones included
    assert (tmp_path / "a" / "pages.warc.gz").read_bytes() == (tmp_path / "b" / "pages.warc.gz").read_bytes()
    write_sample(tmp_path / "c", seed=1)
    assert not set(ids) & set(_record_ids(tmp_path / "c" / "pages.warc.gz"))
