"""`{run_dir}` paths in a recipe: `..` after a folder not made yet is taken lexically (the kernel cannot follow
it), and left to the kernel after one that exists (after a symlink it is not the folder above)."""

from __future__ import annotations

import os
from pathlib import Path

from mathmix.paths import run_path


def test_dot_dot_after_a_folder_not_made_yet_is_the_folder_above(tmp_path):
    assert run_path("{run_dir}/../bench", tmp_path / "new" / "run") == str(tmp_path / "new" / "bench")
    assert run_path("{run_dir}/../../b", tmp_path / "new" / "run") == str(tmp_path / "b")
    assert run_path("{run_dir}/bench", tmp_path / "run") == f"{tmp_path}/run/bench"  # no `..`: as given


def test_dot_dot_after_an_existing_folder_is_left_to_the_kernel(tmp_path):
    (tmp_path / "real" / "run").mkdir(parents=True)
    (tmp_path / "link").symlink_to(tmp_path / "real" / "run")
    given = f"{tmp_path}/link/../bench"  # the kernel reads real/bench, normpath would say tmp/bench
    assert run_path(given, tmp_path) == given
    assert os.path.realpath(run_path(given, tmp_path)) == str(Path(tmp_path / "real" / "bench").resolve())
    assert run_path("{run_dir}/../x", tmp_path / "real" / "run") == f"{tmp_path}/real/run/../x"
