"""Job records (pipelines.job_record): what a refusal says, what a new job taking over a folder clears, and an
output folder placed inside an input folder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipelines.job_record import check_job, describe_difference, job_identity


def _record(out: Path, record: dict) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "job.json").write_text(json.dumps(record))


def _web_record(inputs: list[Path], run_dir: Path, command: bool = True) -> dict:
    """A web job's record as it was written before (`command: False`) and after web recorded its command."""
    extra = {"command": "web"} if command else {}
    return job_identity(inputs, {}, run_dir, **extra, math_model=None, tasks=1)


def test_a_refusal_names_the_command_that_wrote_the_folder(tmp_path):
    both = tmp_path / "both.jsonl"
    both.write_text('{"id": "a", "text": "x"}\n')
    dedup = job_identity([both], {}, tmp_path, tasks=1)  # dedup records no command
    for command, said in ((True, "it holds the output of web"), (False, "another command")):
        out = tmp_path / f"clash{command}"
        _record(out, _web_record([both], tmp_path, command))
        (out / "summary.json").write_text("{}")
        with pytest.raises(ValueError) as err:
            check_job(out, dedup, "dedup run")
        assert said in str(err.value) and "()" not in str(err.value), err.value


def test_a_difference_is_never_described_as_nothing():
    # a key present on one side only, with a value that reads like a missing one
    assert describe_difference({"a": 1, "x": None}, {"a": 1}) != ""
    assert describe_difference({"a": 1}, {"a": 1, "x": None}) != ""
    assert describe_difference({"command": "c", "x": None}, {"command": "c"}) == "x: None -> (default)"


def test_a_record_from_before_the_command_was_recorded_is_the_same_job(tmp_path):
    inputs = [tmp_path / "a.warc.gz"]
    inputs[0].write_bytes(b"x")
    out = tmp_path / "web"
    _record(out, _web_record(inputs, tmp_path, command=False))
    (out / "summary.json").write_text("{}")
    earlier = [_web_record(inputs, tmp_path, command=False)]
    assert not check_job(out, _web_record(inputs, tmp_path), "web run", earlier=earlier)
    assert json.loads((out / "job.json").read_text())["command"] == "web"
    # one with other settings is described by its differences, not as another command's
    _record(out, {"inputs": ["/a"], "settings": {"ngram": 8}})
    new = {"command": "decont", "inputs": ["/a"], "settings": {}}
    with pytest.raises(ValueError, match=r"\(settings.ngram: 8 -> \(default\)\)"):
        check_job(out, new, "decont run", earlier=[{"inputs": ["/a"], "settings": {}}])
    with pytest.raises(ValueError, match=r"\(it holds the output of another command\)"):
        check_job(out, new, "decont run")  # no earlier form without a command: another command's record


def _killed(out: Path, identity: dict, outputs: tuple[str, ...]) -> None:
    """OUT as a job killed before finishing anything leaves it: its record, a 0-byte Parquet file, a log."""
    check_job(out, identity, "web run", outputs=outputs)
    (out / "data").mkdir(parents=True, exist_ok=True)
    (out / "data" / "000_00001.parquet").write_bytes(b"")
    (out / "logs").mkdir(exist_ok=True)
    (out / "logs" / "task_00000.log").write_text("started\n")


def test_a_new_job_taking_over_a_folder_clears_what_the_killed_job_wrote(tmp_path):
    out = tmp_path / "X"
    out.mkdir()
    (out / "notes.txt").write_text("mine")  # not the job's: kept
    _killed(out, {"inputs": ["/big"], "settings": {}}, ("data", "logs", "rejects"))
    assert not check_job(out, {"inputs": ["/math"], "settings": {}}, "web run", outputs=("data", "logs"))
    assert sorted(p.name for p in out.iterdir()) == ["job.json", "notes.txt"]
    assert json.loads((out / "job.json").read_text())["inputs"] == ["/math"]


def test_the_same_job_resumed_keeps_its_partial_output(tmp_path):
    out = tmp_path / "X"
    identity = {"inputs": ["/big"], "settings": {}}
    _killed(out, identity, ("data", "logs"))
    assert check_job(out, identity, "web run", outputs=("data", "logs"))
    assert (out / "data" / "000_00001.parquet").is_file()


def test_a_takeover_is_refused_where_the_output_is_not_known_to_be_the_killed_jobs(tmp_path):
    # data/ was there before the first job started (a user's folder): never deleted
    out = tmp_path / "X"
    (out / "data").mkdir(parents=True)
    (out / "data" / "mine.parquet").write_bytes(b"PAR1")
    _killed(out, {"inputs": ["/big"], "settings": {}}, ("data", "logs"))
    with pytest.raises(ValueError, match=r"X holds unfinished output of another job .*: data"):
        check_job(out, {"inputs": ["/math"], "settings": {}}, "web run", outputs=("data", "logs"))
    assert (out / "data" / "mine.parquet").is_file() and (out / "logs").is_dir()
    # a record written before jobs listed their outputs: what is in data/ is unknown, so it is kept
    old = tmp_path / "Y"
    _record(old, {"inputs": ["/big"], "settings": {}})
    (old / "data").mkdir()
    (old / "data" / "000_00001.parquet").write_bytes(b"")
    with pytest.raises(ValueError, match="delete data"):
        check_job(old, {"inputs": ["/math"], "settings": {}}, "web run", outputs=("data", "logs"))
    assert (old / "data" / "000_00001.parquet").is_file()


def test_a_recorded_output_outside_the_folder_is_never_deleted(tmp_path):
    out = tmp_path / "X"
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("keep")
    _record(out, {"inputs": ["/big"], "settings": {}, "outputs": ["../outside", "/tmp", "", ".", "job.json"]})
    (out / "link").symlink_to(outside)
    record = {"inputs": ["/big"], "settings": {}, "outputs": ["link"]}
    _record(tmp_path / "Z", record)
    (tmp_path / "Z" / "link").symlink_to(outside)
    check_job(out, {"inputs": ["/math"], "settings": {}}, "web run")
    check_job(tmp_path / "Z", {"inputs": ["/math"], "settings": {}}, "web run")
    assert (outside / "keep.txt").is_file() and not (tmp_path / "Z" / "link").exists()


def test_an_output_folder_inside_an_input_folder_is_refused(tmp_path):
    from pipelines.job_record import check_output_outside_inputs

    ddin = tmp_path / "ddin"
    ddin.mkdir()
    (ddin / "a.jsonl").write_text("{}\n")
    for out in (ddin / "out", ddin, ddin / "x" / "y"):
        with pytest.raises(ValueError, match=r"is inside the input folder .*ddin"):
            check_output_outside_inputs(out, [str(ddin)])
    check_output_outside_inputs(ddin / "out", [str(ddin / "a.jsonl")])  # a file: a rerun reads the same file
    check_output_outside_inputs(tmp_path / "out", [str(ddin), str(tmp_path / "nope*")])


def test_digests_of_files_read_at_other_paths_are_named():
    from pipelines.job_record import describe_difference

    old = {
        "command": "x",
        "file_digests": {"blocklist": ["/a/bl.txt", "1:aa"], "benchmark g": ["/b/g", "1:bb"]},
    }
    new = {"command": "x", "file_digests": {"blocklist": ["/c/bl.txt", "1:aa"]}}
    said = describe_difference(old, new)
    assert "blocklist: /a/bl.txt -> /c/bl.txt" in said and "benchmark g: read by one job only" in said


def test_a_web_record_without_its_default_models_digest_is_adopted_once(tmp_path):
    # a recipe's web stage scoring with the run classifier's model.bin by default had only its blocklist digested
    out = tmp_path / "web"
    bl, model = ["/r/bl.txt", "3:aa"], ["{run_dir}/classifier/model.bin", "9:bb"]
    old = {"inputs": [], "settings": {}, "file_digests": {"blocklist": bl}}
    now = {**old, "file_digests": {"blocklist": bl, "math_model": model}}
    _record(out, old)
    (out / "summary.json").write_text("{}")
    assert not check_job(out, now, "recipe stage (web)")  # the same job, rewritten with the model's digest
    assert json.loads((out / "job.json").read_text()) == now
    retrained = {**old, "file_digests": {"blocklist": bl, "math_model": [model[0], "9:cc"]}}
    with pytest.raises(ValueError, match="math_model: other contents at the same path"):
        check_job(out, retrained, "recipe stage (web)")
    # a model recorded and not read now (no model.bin, the classifier left out) is another job, unlike a hub
    # model's cached snapshot, which a run on another node may not see
    with pytest.raises(ValueError, match="math_model: read by one job only"):
        check_job(out, old, "recipe stage (web)")


def test_a_record_without_a_command_is_told_apart_from_this_form_not_an_older_one(tmp_path):
    # a recipe stage records no command; its older form (the recipe's inputs, `[]` for the classifier, before it
    # recorded the pages it reads) was the form a changed record was told apart from: a page added read as
    # "left out" every page
    out = tmp_path / "classifier"
    pages = ["/p/a.html", "/p/b.html"]
    _record(out, {"inputs": pages, "settings": {}, "input_sizes": [1, 2]})
    (out / "summary.json").write_text("{}")
    now = {"inputs": [*pages, "/p/c.html"], "settings": {}, "input_sizes": [1, 2, 3]}
    older = {"inputs": [], "settings": {}}
    with pytest.raises(ValueError, match=r"other input paths \(added: /p/c.html\)\)"):
        check_job(out, now, "recipe stage (classifier)", earlier=[older])


def test_a_refusal_names_inputs_in_the_run_folder_by_their_paths(tmp_path):
    """Records write paths under OUT's parent as {run_dir}/...; a refusal showed that placeholder to the user."""
    page = tmp_path / "pages.jsonl"
    page.write_text('{"id": "a", "text": "x"}\n')
    out = tmp_path / "dedup"
    check_job(out, job_identity([page], {}, tmp_path, command="dedup"), "dedup run")
    (out / "summary.json").write_text("{}")  # finished work
    other = tmp_path / "other.jsonl"
    other.write_text('{"id": "b", "text": "y"}\n')
    with pytest.raises(ValueError) as err:
        check_job(out, job_identity([other], {}, tmp_path, command="dedup"), "dedup run")
    assert "{run_dir}" not in str(err.value) and str(other.resolve()) in str(err.value), err.value


def test_a_refusal_names_paths_of_a_run_folder_above_the_parent(tmp_path):
    """A recipe's shards build writes RUN/shards/NAME with RUN as its run folder: a refusal named RUN/shards/..."""
    run = tmp_path / "run"
    data = run / "decont" / "data"
    data.mkdir(parents=True)
    (data / "a.jsonl").write_text('{"id": "a", "text": "x"}\n')
    out = run / "shards" / "corpus"
    check_job(out, job_identity([data], {}, run), "shards build", run_dir=run)
    (out / "summary.json").write_text("{}")
    (data / "a.jsonl").write_text('{"id": "a", "text": "xyz"}\n')
    with pytest.raises(ValueError) as err:
        check_job(out, job_identity([data], {}, run), "shards build", run_dir=run)
    assert f"{data.resolve()})" in str(err.value), err.value


def test_mathmix_own_files_are_recorded_by_their_place_in_mathmix(tmp_path, monkeypatch):
    """A prompt template or shipped train recipe was recorded by absolute path: a run folder resumed with another
    checkout or install of mathmix (same files) was refused over the path alone."""
    import pipelines.job_record as job_record

    records = []
    for checkout in ("a", "b"):
        root = tmp_path / checkout
        (root / "recipes").mkdir(parents=True)
        recipe = root / "recipes" / "tiny.yaml"
        recipe.write_text("lr: 0.001\n")
        monkeypatch.setattr(job_record, "SOURCE_ROOT", root)
        digests = {"recipe": [str(recipe), job_record.yaml_digest(recipe)]}
        records.append(job_identity([], {}, tmp_path / "run", file_digests=digests))
    assert records[0] == records[1]
    assert records[0]["file_digests"]["recipe"][0] == "{mathmix}/recipes/tiny.yaml"
    out = tmp_path / "run" / "train"
    check_job(out, records[0], "recipe stage (train)")
    (out / "summary.json").write_text("{}")
    assert check_job(out, records[1], "recipe stage (train)")  # the same job
    (tmp_path / "b" / "recipes" / "tiny.yaml").write_text("lr: 0.002\n")
    changed = job_identity([], {}, tmp_path / "run", file_digests={"recipe": [str(tmp_path / "b/recipes/tiny.yaml"),
                           job_record.yaml_digest(tmp_path / "b/recipes/tiny.yaml")]})  # fmt: skip
    with pytest.raises(ValueError) as err:
        check_job(out, changed, "recipe stage (train)")
    assert "{mathmix}" not in str(err.value) and "recipe" in str(err.value), err.value


def test_only_trains_recipe_and_mixtures_are_digested_by_what_they_say(tmp_path):
    """A web blocklist (or any file a stage reads) named .yaml was recorded by its bytes before YAML digests
    existed; digested by what it says, a finished stage's record no longer matched after the upgrade."""
    from pipelines.job_record import file_digest, yaml_digest
    from pipelines.runner import _digest_of

    listed = tmp_path / "blocklist.yaml"
    listed.write_text("# domains\n- spam.example\n")
    assert _digest_of("blocklist", str(listed)) == file_digest(listed)
    assert (
        _digest_of("recipe", str(listed)) == _digest_of("mixture decay", str(listed)) == yaml_digest(listed)
    )
