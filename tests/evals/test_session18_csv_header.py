"""Found by session 18's review of evals: CSV header names kept their surrounding spaces (run " runA ")."""

from __future__ import annotations

from evals.curves import read_curves_csv


def test_csv_header_names_are_read_without_their_surrounding_spaces(tmp_path):
    path = tmp_path / "space.csv"
    path.write_text(" Step , runA , runB\n0,0.1,0.2\n5,0.2,0.3\n10,0.3,0.4\n")
    assert [c.name for c in read_curves_csv(path, accuracy_only=False)] == ["runA", "runB"]
