"""The one JSON-records reader behind decont, the classifier and the evals."""

from __future__ import annotations

import pytest

from mathmix.records import read_objects, read_records


def test_jsonl_and_arrays_by_suffix_or_content(tmp_path):
    (tmp_path / "a.jsonl").write_text('{"q": 1}\n\n{"q": 2}\n')
    assert list(read_records(tmp_path / "a.jsonl")) == [(0, {"q": 1}), (2, {"q": 2})]  # positions are lines
    (tmp_path / "b.json").write_text('[{"q": 1},\n {"q": 2}]')
    (tmp_path / "prompts.txt").write_text('  [{"q": 1}, {"q": 2}]')  # an array under any name
    for name in ("b.json", "prompts.txt"):
        assert [r for _, r in read_records(tmp_path / name)] == [{"q": 1}, {"q": 2}]


def test_errors_name_the_file_and_line(tmp_path):
    (tmp_path / "bad.jsonl").write_text('{"q": 1}\n{"q": \n')
    with pytest.raises(ValueError, match=r"bad.jsonl:2: not valid JSON"):
        list(read_records(tmp_path / "bad.jsonl"))
    (tmp_path / "latin.jsonl").write_bytes('{"q": "caf\u00e9"}\n'.encode("latin-1"))
    with pytest.raises(ValueError, match=r"latin.jsonl:1: not UTF-8 text"):
        list(read_records(tmp_path / "latin.jsonl"))
    (tmp_path / "list.jsonl").write_text('{"q": 1}\n"just a string"\n')
    with pytest.raises(ValueError, match=r"list.jsonl: line 2 is not a JSON object"):
        read_objects(tmp_path / "list.jsonl")
    (tmp_path / "obj.json").write_text('{"q": 1}')
    with pytest.raises(ValueError, match=r"obj.json: a .json file must hold a list of records, not a dict"):
        list(read_records(tmp_path / "obj.json"))


def test_read_objects_counts_array_records_from_1_as_lines_are(tmp_path):
    """A .json array's first record was `record 0` while a JSONL file's first line is `line 1`; an array under
    another name (read as one) was named by `line`, though its positions are the array's, not lines."""
    (tmp_path / "a.json").write_text('[\n"not an object",\n{"q": 1}\n]')
    with pytest.raises(ValueError, match=r"a.json: record 1 is not a JSON object$"):
        read_objects(tmp_path / "a.json")
    (tmp_path / "b.json").write_text('[{"q": 1}, 2]')
    with pytest.raises(ValueError, match=r"b.json: record 2 is not a JSON object$"):
        read_objects(tmp_path / "b.json")
    (tmp_path / "prompts.txt").write_text('[{"q": 1}, {"q": 2}, [3]]')  # an array, whatever its name
    with pytest.raises(ValueError, match=r"prompts.txt: record 3 is not a JSON object$"):
        read_objects(tmp_path / "prompts.txt")
    (tmp_path / "c.jsonl").write_text('{"q": 1}\n\n[3]\n')  # the file's line, blank lines counted
    with pytest.raises(ValueError, match=r"c.jsonl: line 3 is not a JSON object$"):
        read_objects(tmp_path / "c.jsonl")


def test_one_object_per_json_file_where_asked(tmp_path):
    (tmp_path / "1.json").write_text('{"problem": "p", "solution": "s"}')
    assert list(read_records(tmp_path / "1.json", one_object=True)) == [
        (0, {"problem": "p", "solution": "s"})
    ]
    with pytest.raises(ValueError, match="must hold a list of records"):
        list(read_records(tmp_path / "1.json"))


def test_a_json_suffix_in_capitals_is_read_as_json(tmp_path):
    """`2.JSON` holding one object over several lines was read as JSONL: its first line `{` was not JSON."""
    (tmp_path / "2.JSON").write_text('{\n  "problem": "p",\n  "solution": "s"\n}\n')
    assert list(read_records(tmp_path / "2.JSON", one_object=True)) == [
        (0, {"problem": "p", "solution": "s"})
    ]


def test_every_user_yaml_refuses_a_key_given_twice_in_one_line(tmp_path):
    from midtrain.config import TrainRecipeError, load_train_recipe
    from shards.mixture import MixtureConfig

    train = tmp_path / "train.yaml"
    train.write_text("name: t\ntrainer:\n  lr: 1.0\n  lr: 0.002\n")
    with pytest.raises(TrainRecipeError, match=r"train.yaml: not valid YAML: 'lr' is given twice") as err:
        load_train_recipe(train)
    assert "\n" not in str(err.value) and "<unicode string>" not in str(err.value)
    mix = tmp_path / "mix.yaml"
    mix.write_text("name: m\nname: n\nsources: []\n")
    with pytest.raises(ValueError, match=r"mix.yaml: not valid YAML: 'name' is given twice"):
        MixtureConfig.from_yaml(mix)
