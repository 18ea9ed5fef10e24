"""ListOps: generated files checked by an evaluator independent of the generator, the reader and
tokeniser against the files, and the cache's reuse and atomicity."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import numpy as np
import pytest
import torch

import tasks
from tasks.base import TaskError
from tasks.lra import TABLE, listops

SIZES = {"train": 30, "val": 10, "test": 10}


def config(**overrides: object) -> dict:
    base = {
        "name": "listops",
        "family": "lra",
        "backbone": "encoder",
        "seq_len": 2000,
        "source": "generate",
        "num_train": SIZES["train"],
        "num_val": SIZES["val"],
        "num_test": SIZES["test"],
        "data_seed": 0,
    }
    return {**base, **overrides}


def read_rows(path: Path) -> list[tuple[str, str]]:
    """The rows of a release-format file, parsed by hand (not by the reader under test)."""
    lines = path.read_bytes().decode().split("\r\n")
    assert lines[0] == "Source\tTarget" and lines[-1] == "", f"{path}: header or line ends differ from LRA's"
    rows = [tuple(line.split("\t")) for line in lines[1:-1]]
    assert all(len(row) == 2 for row in rows)
    return rows


def evaluate(source: str) -> dict[str, int]:
    """Value, length, tree depth and widest operation of an expression in LRA's printed form,
    read with a stack over its nested pairs ``( left right )``."""
    tokens = source.split(" ")
    assert "" not in tokens, "tokens must be separated by single spaces"
    stack: list = []
    nesting = depth = widest = 0
    for token in tokens:
        if token == ")":
            right, left, opener = stack.pop(), stack.pop(), stack.pop()
            assert opener == "("
            if isinstance(left, str):  # an operator meets its first argument
                stack.append((left, [right]))
            elif right == "]":  # the operation is complete
                operator, args = left
                widest = max(widest, len(args))
                stack.append(
                    {
                        "[MAX": max(args),
                        "[MIN": min(args),
                        "[MED": int(statistics.median(args)),
                        "[SM": sum(args) % 10,
                    }[operator]
                )
            else:
                stack.append((left[0], left[1] + [right]))
        elif token in ("(", "]"):
            stack.append(token)
            nesting -= token == "]"
        elif token.startswith("["):
            stack.append(token)
            nesting += 1
        else:
            stack.append(int(token))
            depth = max(depth, nesting + 1)  # a digit sits one level below its operation
    assert len(stack) == 1 and isinstance(stack[0], int), "unbalanced expression"
    length = sum(token not in "()" for token in tokens)
    return {"value": stack[0], "length": length, "depth": depth, "widest": widest}


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out_dir = tmp_path_factory.mktemp("listops")
    listops.generate(out_dir, SIZES["train"], SIZES["val"], SIZES["test"], seed=3)
    return out_dir


def test_generated_rows_follow_lra_rules(generated: Path) -> None:
    for split, size in SIZES.items():
        rows = read_rows(generated / f"basic_{split}.tsv")
        assert len(rows) == size
        for source, target in rows:
            facts = evaluate(source)
            assert str(facts["value"]) == target
            assert 500 < facts["length"] < 2000
            assert facts["depth"] <= 10
            assert 2 <= facts["widest"] <= 10


def test_generation_is_deterministic_and_splits_disjoint(generated: Path, tmp_path: Path) -> None:
    listops.generate(tmp_path / "same", SIZES["train"], SIZES["val"], SIZES["test"], seed=3)
    listops.generate(tmp_path / "other", SIZES["train"], SIZES["val"], SIZES["test"], seed=4)
    for split in SIZES:
        name = f"basic_{split}.tsv"
        assert (tmp_path / "same" / name).read_bytes() == (generated / name).read_bytes()
        assert (tmp_path / "other" / name).read_bytes() != (generated / name).read_bytes()
    sources = [source for split in SIZES for source, _ in read_rows(generated / f"basic_{split}.tsv")]
    assert len(set(sources)) == len(sources)


def test_reader_and_tokens_round_trip(generated: Path) -> None:
    for split in SIZES:
        path = generated / f"basic_{split}.tsv"
        rows = read_rows(path)
        split_data = listops.read_split(path)
        assert list(split_data["label"]) == [int(target) for _, target in rows]
        for (source, _), ids in zip(rows, split_data["input_ids"]):
            assert len(ids) == evaluate(source)["length"]  # one id per token but the parentheses
            assert 0 not in ids
            assert listops.decode(ids) == source


def test_brackets_keep_the_nesting() -> None:
    # LRA's tokeniser read both as "MAX 2 MIN 4 1 3": MAX(2, MIN(4, 1, 3)) = 2, MAX(2, MIN(4, 1), 3) = 3.
    inner = "( ( ( [MAX 2 ) ( ( ( ( [MIN 4 ) 1 ) 3 ) ] ) ) ] )"
    outer = "( ( ( ( [MAX 2 ) ( ( ( [MIN 4 ) 1 ) ] ) ) 3 ) ] )"
    assert [listops.VOCAB[i] for i in listops.encode(inner)] == ["[MAX", "2", "[MIN", "4", "1", "3", "]", "]"]
    assert [listops.VOCAB[i] for i in listops.encode(outer)] == ["[MAX", "2", "[MIN", "4", "1", "]", "3", "]"]
    assert (evaluate(inner)["value"], evaluate(outer)["value"]) == (2, 3)
    assert listops.decode(listops.encode(inner)) == inner and listops.decode(listops.encode(outer)) == outer
    assert len(set(listops.VOCAB)) == len(listops.VOCAB) and listops.VOCAB[0] == "<pad>"
    assert {"]", "[MAX", "[MIN", "[MED", "[SM", *map(str, range(10))} == set(listops.VOCAB[1:])


def write_tsv_text(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(line + "\r\n" for line in lines))
    return path


GOOD = "( ( ( [MAX 2 ) 7 ) ] )\t7"


@pytest.mark.parametrize(
    ("lines", "bad_line", "says"),
    [
        (["Input\tLabel", GOOD], 1, "header"),
        (["Source\tTarget", GOOD, "( ( ( [MAX 2 ) 7 ) ] )\t7\textra"], 3, "3 tab-separated fields"),
        (["Source\tTarget", GOOD, "( ( ( [MAX 2 ) 7 ) ] )\tseven"], 3, "'seven'"),
        (["Source\tTarget", GOOD, GOOD, "( ( ( [MAX 2 ) 12 ) ] )\t2"], 4, "unknown ListOps token '12'; valid"),
    ],
)
def test_malformed_tsv_names_file_and_line(tmp_path: Path, lines: list[str], bad_line: int, says: str) -> None:
    path = write_tsv_text(tmp_path / "basic_train.tsv", lines)
    with pytest.raises(TaskError) as error:
        listops.read_split(path)
    assert f"{path}:{bad_line}:" in str(error.value) and says in str(error.value)


def test_reader_accepts_lf_and_blank_lines(tmp_path: Path) -> None:
    path = tmp_path / "basic_val.tsv"
    path.write_text("Source\tTarget\n( ( ( [SM 2 ) 9 ) ] )\t1\n\n( ( ( [MIN 2 ) 9 ) ] )\t2\n\n")
    split = listops.read_split(path)
    assert list(split["label"]) == [1, 2]
    assert [listops.decode(ids) for ids in split["input_ids"]] == ["( ( ( [SM 2 ) 9 ) ] )", "( ( ( [MIN 2 ) 9 ) ] )"]


def test_load_caches_and_reuses(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    real_generate = listops.generate
    monkeypatch.setattr(listops, "generate", lambda *args: calls.append(args) or real_generate(*args))
    data = tasks.load("listops", config(seq_len=700), tmp_path)
    again = tasks.load("listops", config(seq_len=700), tmp_path)
    assert len(calls) == 1

    key_dir = tmp_path / "listops" / data.info.extra["cache_key"]
    assert sorted(p.name for p in (tmp_path / "listops").iterdir()) == [key_dir.name]
    rows = read_rows(key_dir / "basic_test.tsv")
    for split in ("train", "val", "test"):
        assert len(getattr(data, split)) == len(getattr(again, split)) == SIZES[split]
    for index, (source, target) in enumerate(rows):
        item = again.test[index]
        assert item["input_ids"].dtype == item["label"].dtype == torch.int64 and item["label"].ndim == 0
        assert item["label"].item() == int(target)
        ids = listops.encode(source)
        assert torch.equal(item["input_ids"], torch.from_numpy(ids[:700].astype(np.int64)))
    assert any(len(listops.encode(source)) > 700 for source, _ in rows)  # so truncation was exercised

    train_labels = [int(target) for _, target in read_rows(key_dir / "basic_train.tsv")]
    majority = max(range(10), key=lambda label: (train_labels.count(label), -label))
    assert data.baseline == pytest.approx(np.mean([int(target) == majority for _, target in rows]))
    assert (data.info.vocab_size, data.info.num_classes, data.info.seq_len) == (16, 10, 700)


def test_failed_build_leaves_no_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def fail(directory: Path) -> None:
        assert (directory / "basic_train.tsv").is_file()  # the generator wrote its files first
        raise RuntimeError("interrupted")

    monkeypatch.setattr(listops, "read_splits", fail)
    with pytest.raises(RuntimeError, match="interrupted"):
        listops.load(config(), tmp_path)
    assert list((tmp_path / "listops").iterdir()) == []
    monkeypatch.undo()
    assert len(listops.load(config(), tmp_path).train) == SIZES["train"]


def test_local_release_reads_the_same_files(generated: Path, tmp_path: Path) -> None:
    release = tmp_path / "lra_release" / "listops-1000"
    release.mkdir(parents=True)
    for split in SIZES:
        (release / f"basic_{split}.tsv").write_bytes((generated / f"basic_{split}.tsv").read_bytes())
    data = listops.load(config(source="local", num_train=20), tmp_path)
    assert len(data.train) == 20 and len(data.test) == SIZES["test"]
    for index, (source, target) in enumerate(read_rows(release / "basic_train.tsv")[:20]):
        assert listops.decode(data.train[index]["input_ids"]) == source
        assert data.train[index]["label"].item() == int(target)
    with pytest.raises(TaskError, match=r"task.num_train=31: the local data has only 30 examples"):
        listops.load(config(source="local", num_train=31), tmp_path)


def test_missing_local_release_says_where_and_how(tmp_path: Path) -> None:
    with pytest.raises(TaskError) as error:
        listops.load(config(source="local"), tmp_path)
    message = str(error.value)
    for split in SIZES:
        assert str(tmp_path / "lra_release" / "listops-1000" / f"basic_{split}.tsv") in message
    assert "lra_release.gz" in message and "task.source=generate" in message


@pytest.mark.parametrize(
    ("overrides", "says"),
    [
        ({"source": "remote"}, "task.source='remote': valid choices are generate, local"),
        ({"num_train": 0}, "task.num_train=0: expected an integer >= 1"),
        ({"seq_len": "long"}, "task.seq_len='long': expected an integer >= 1"),
        ({"data_seed": None}, "task.data_seed=None: expected an integer >= 0"),
    ],
)
def test_bad_config_is_one_clear_error(tmp_path: Path, overrides: dict, says: str) -> None:
    with pytest.raises(TaskError) as error:
        listops.load(config(**overrides), tmp_path)
    assert str(error.value) == says


def short_config(make_config, **overrides: object) -> dict:
    """conf/task/listops_short.yaml as composed, with small splits."""
    task = make_config("task=listops_short")["task"]
    return {**task, "num_train": SIZES["train"], "num_val": SIZES["val"], "num_test": SIZES["test"], **overrides}


def test_listops_short_keeps_lengths_strictly_between_its_bounds(make_config, tmp_path: Path) -> None:
    config = short_config(make_config)
    low, high = config["min_length"], config["max_length"]
    assert (low, high, config["seq_len"]) == (10, 100, 100)
    data = listops.load(config, tmp_path)
    key_dir = tmp_path / "listops" / data.info.extra["cache_key"]
    lengths = []
    for split in SIZES:
        for source, target in read_rows(key_dir / f"basic_{split}.tsv"):
            facts = evaluate(source)
            assert str(facts["value"]) == target
            assert facts["length"] == len(listops.encode(source))
            lengths.append(facts["length"])
    assert len(lengths) == sum(SIZES.values())
    assert all(low < length < high for length in lengths), sorted(lengths)
    # Every example fits seq_len whole: no truncation at the short lengths.
    assert all(len(data.test[i]["input_ids"]) == len(listops.encode(source))
               for i, (source, _) in enumerate(read_rows(key_dir / "basic_test.tsv")))
    assert (data.info.name, data.info.extra["min_length"], data.info.extra["max_length"]) == ("listops_short", 10, 100)


def test_listops_short_has_its_own_cache_key(make_config, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Only the keys are compared, so no data is built (LRA's lengths are slow to draw).
    class Stop(Exception):
        pass

    def record_key(directory: Path, build) -> None:
        keys.append(directory.name)
        raise Stop

    keys: list[str] = []
    monkeypatch.setattr(listops, "cached_splits", record_key)
    for cfg in (config(), short_config(make_config, seq_len=2000, min_length=500, max_length=2000),
                short_config(make_config)):
        with pytest.raises(Stop):
            listops.load(cfg, tmp_path)
    default, same_lengths, short = keys
    assert default == "generate-train30-val10-test10-seed0-v1"  # LRA's lengths keep their old key
    assert same_lengths == default  # the name alone does not change the data
    assert short == default + "-len10-100"


@pytest.mark.parametrize(
    ("overrides", "says"),
    [
        ({"min_length": 10, "max_length": 11}, "max_length - min_length must be >= 2"),
        ({"min_length": 50, "max_length": 40}, "max_length - min_length must be >= 2"),
        ({"max_length": 2001}, "max_length <= 2000"),
        ({"seq_len": 101}, "task.seq_len=101: ListOps expressions are shorter than 100 tokens"),
        ({"min_length": -1}, "task.min_length=-1: expected an integer >= 0"),
    ],
)
def test_bad_lengths_are_refused(make_config, tmp_path: Path, overrides: dict, says: str) -> None:
    with pytest.raises(TaskError, match=says):
        listops.load(short_config(make_config, **overrides), tmp_path)
    assert not (tmp_path / "listops").exists()  # refused before anything was generated


@pytest.mark.slow  # generates the board's ListOps data (22,000 expressions): about 10 s; .ci/run runs it
def test_the_baseline_table_holds_the_majority_class_of_each_configs_own_data(tmp_path):
    """tasks/lra/baselines.json, which validate and the site check records against, is what the
    data of each listed config gives (scripts/data_baselines.py wrote it)."""
    entries = json.loads(TABLE.read_text())["baselines"]
    assert entries, "the table lists the board's ListOps config"
    for entry in entries:
        assert tasks.load(entry["task"]["name"], entry["task"], tmp_path).baseline == entry["baseline"]
        assert tasks.baseline(entry["task"]["name"], entry["task"]) == entry["baseline"]
