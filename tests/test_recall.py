"""Recall tasks: MQAR's labels, vocabulary halves, seeds and gap law; selective copying's labels;
the loaders, their cache and the Zoology preset."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

import tasks
from tasks.base import TaskError
from tasks.recall import mqar, selective_copying

CONF_DIR = Path(__file__).resolve().parent.parent / "conf"
IGNORE = -100


def mqar_config(**overrides) -> dict:
    config = {"name": "mqar", "source": "generate", "seq_len": 64, "num_kv_pairs": 4, "vocab_size": 256,
              "power_a": 0.01, "num_train": 40, "num_val": 10, "num_test": 20, "data_seed": 0}
    return {**config, **overrides}


def copying_config(**overrides) -> dict:
    config = {"name": "selective_copying", "source": "generate", "seq_len": 50, "num_tokens": 6,
              "vocab_size": 8, "num_train": 30, "num_val": 10, "num_test": 10, "data_seed": 0}
    return {**config, **overrides}


# MQAR ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("seq_len,num_kv_pairs,vocab_size",
                         [(64, 4, 8192), (70, 5, 100), (128, 32, 300), (256, 16, 8192)])
def test_mqar_answer_is_the_value_bound_to_the_queried_key(seq_len, num_kv_pairs, vocab_size):
    inputs, labels = mqar.make(200, seq_len, num_kv_pairs, vocab_size, seed=3)
    assert inputs.dtype == labels.dtype == torch.int64
    assert inputs.shape == labels.shape == (200, seq_len)
    context = 2 * num_kv_pairs
    for row, row_labels in zip(inputs.tolist(), labels.tolist()):
        bound = dict(zip(row[0:context:2], row[1:context:2]))  # read the pairs off the input
        assert len(bound) == num_kv_pairs, "keys repeat within an example"
        answered = []
        for position in range(seq_len):
            if position < context:
                assert row_labels[position] == IGNORE
            elif row[position] == mqar.BLANK:
                assert row_labels[position] == IGNORE
            else:  # the only non-blank tokens after the pairs are the queried keys
                assert row_labels[position] == bound[row[position]]
                assert (position - context) % 2 == 0
                answered.append(row[position])
        assert sorted(answered) == sorted(bound), "every key is queried exactly once"


def test_mqar_keys_and_values_come_from_disjoint_halves():
    vocab_size = 66
    inputs, _ = mqar.make(500, 64, 8, vocab_size, seed=0)
    keys, values = inputs[:, 0:16:2], inputs[:, 1:16:2]
    half = vocab_size // 2
    # Zoology's keys [1, V/2) and values [V/2, V), each shifted up by one; 0 (padding) never appears.
    assert keys.min() >= 2 and keys.max() <= half
    assert values.min() >= half + 1 and values.max() <= vocab_size
    assert (inputs != 0).all()
    assert all(len(set(row)) == 8 for row in keys.tolist()) and all(len(set(row)) == 8 for row in values.tolist())
    # every key and every value id gets used: the halves are covered, not a corner of them
    assert len(set(keys.flatten().tolist())) == half - 1
    assert len(set(values.flatten().tolist())) == vocab_size - half


def test_mqar_same_seed_same_data_other_seed_other_data():
    first = mqar.make(50, 64, 4, 8192, seed=7)
    again = mqar.make(50, 64, 4, 8192, seed=7)
    other = mqar.make(50, 64, 4, 8192, seed=8)
    assert torch.equal(first[0], again[0]) and torch.equal(first[1], again[1])
    assert (first[0] != other[0]).any(dim=1).all(), "a different seed should change every example"


def query_slots(seq_len: int, num_kv_pairs: int, power_a: float) -> np.ndarray:
    """How often each query slot holds a query, over many examples."""
    inputs, _ = mqar.make(4000, seq_len, num_kv_pairs, 8192, seed=1, power_a=power_a)
    region = inputs[:, 2 * num_kv_pairs:].numpy()
    return (region[:, 0::2] != mqar.BLANK).sum(axis=0)


def test_mqar_query_gaps_follow_a_power_law():
    counts = query_slots(256, 4, power_a=0.01)
    assert len(counts) == (256 - 8) // 2
    quarter = len(counts) // 4
    first, last = counts[:quarter].sum(), counts[-quarter:].sum()
    assert first > 5 * last, f"short gaps {first} should dominate long ones {last}"
    assert counts[0] > counts[1] > counts[4] > counts[30], counts[:31]
    # power_a = 1 is Zoology's uniform setting: no such skew
    uniform = query_slots(256, 4, power_a=1.0)
    ratio = uniform[:quarter].sum() / uniform[-quarter:].sum()
    assert 0.8 < ratio < 1.25, ratio


@pytest.mark.parametrize("seq_len,num_kv_pairs,vocab_size,bad", [
    (63, 4, 8192, "task.seq_len=63"), (64, 17, 8192, "task.num_kv_pairs=17"), (64, 4, 64, "task.vocab_size=64"),
])
def test_mqar_rejects_impossible_sizes(seq_len, num_kv_pairs, vocab_size, bad):
    with pytest.raises(TaskError, match=bad):
        mqar.make(2, seq_len, num_kv_pairs, vocab_size, seed=0)


def test_mqar_loader_describes_the_task_and_caches_its_splits(tmp_path):
    data = tasks.load("mqar", mqar_config(), tmp_path)
    info = data.info
    assert (info.family, info.target, info.seq_len) == ("recall", "token", 64)
    assert info.vocab_size == info.num_classes == 257
    # The baseline is what answering with a random value of the context scores: 1 / pairs.
    assert data.baseline == pytest.approx(1 / 4)
    rng = torch.Generator().manual_seed(0)
    hits = scored = 0
    for i in range(len(data.test)):
        ids, labels = data.test[i]["input_ids"], data.test[i]["label"]
        values = ids[1:8:2]  # k1 v1 ... k4 v4: the values of the context
        answers = labels[labels != IGNORE]
        guesses = values[torch.randint(len(values), (len(answers),), generator=rng)]
        hits, scored = hits + int((guesses == answers).sum()), scored + len(answers)
    assert abs(hits / scored - data.baseline) < 0.15  # 80 answers: within about 3 standard errors
    assert [len(data.train), len(data.val), len(data.test)] == [40, 10, 20]
    item = data.train[0]
    assert item["input_ids"].dtype == item["label"].dtype == torch.int64
    assert item["input_ids"].shape == item["label"].shape == (64,)
    assert int((item["label"] != IGNORE).sum()) == 4
    # train, val and test are drawn from distinct seeds
    train = {tuple(data.train[i]["input_ids"].tolist()) for i in range(len(data.train))}
    assert not train & {tuple(data.test[i]["input_ids"].tolist()) for i in range(len(data.test))}

    cached = list((tmp_path / "recall" / "mqar").iterdir())
    assert len(cached) == 1
    again = tasks.load("mqar", mqar_config(), tmp_path)
    assert torch.equal(again.test[3]["label"], data.test[3]["label"])
    assert list((tmp_path / "recall" / "mqar").iterdir()) == cached, "same config: read from the cache"
    other = tasks.load("mqar", mqar_config(data_seed=1), tmp_path)
    assert len(list((tmp_path / "recall" / "mqar").iterdir())) == 2
    assert not torch.equal(other.test[0]["input_ids"], data.test[0]["input_ids"])


def test_mqar_test_lengths_are_longer_test_splits_with_as_many_pairs_per_token(tmp_path):
    data = tasks.load("mqar", mqar_config(test_lengths=[128, 192]), tmp_path)
    assert [(t.seq_len, t.extra["num_kv_pairs"], t.baseline) for t in data.length_tests] == [
        (128, 8, 1 / 8), (192, 12, 1 / 12)]  # 4 pairs in 64 tokens, as training has
    for test in data.length_tests:
        assert len(test.split) == 20  # the task's test size
        ids, labels = test.split[0]["input_ids"], test.split[0]["label"]
        assert ids.shape == labels.shape == (test.seq_len,)
        assert (labels != IGNORE).sum() == test.extra["num_kv_pairs"]
    assert tasks.load("mqar", mqar_config(), tmp_path).length_tests == []


@pytest.mark.parametrize("lengths", [[64], [32], ["128"], 128, [True]])
def test_mqar_test_lengths_must_be_longer_lengths(tmp_path, lengths):
    with pytest.raises(TaskError, match="task.test_lengths="):
        tasks.load("mqar", mqar_config(test_lengths=lengths), tmp_path)


def test_mqar_train_mix_draws_training_examples_from_each_setting_padded_and_leaves_val_and_test_alone(tmp_path):
    mix = [[16, 2], [32, 4], [64, 8]]
    data = tasks.load("mqar", mqar_config(num_kv_pairs=8, train_mix=mix, num_train=30), tmp_path)
    shapes = []
    for i in range(len(data.train)):
        ids, labels = data.train[i]["input_ids"], data.train[i]["label"]
        assert ids.shape == labels.shape == (64,)  # padded to the task's length
        length = int((ids != 0).sum())
        assert (ids[length:] == 0).all() and (labels[length:] == IGNORE).all()  # padding after the example
        shapes.append((length, int((labels != IGNORE).sum())))
    assert sorted(set(shapes)) == [(16, 2), (32, 4), (64, 8)]
    assert [shapes.count(s) for s in sorted(set(shapes))] == [10, 10, 10]  # equal shares, in one shuffled order
    assert shapes != sorted(shapes)
    plain = tasks.load("mqar", mqar_config(num_kv_pairs=8, num_train=30), tmp_path)
    for split in ("val", "test"):  # validation and test stay at the task's own length and pairs
        assert torch.equal(getattr(data, split)[0]["input_ids"], getattr(plain, split)[0]["input_ids"])
    assert not torch.equal(data.train[0]["input_ids"], plain.train[0]["input_ids"])


@pytest.mark.parametrize("mix", [[[128, 4]], [[64]], [[16, 5]], "64x4", [[16, True]]])
def test_mqar_train_mix_refuses_a_setting_the_task_cannot_hold(tmp_path, mix):
    with pytest.raises(TaskError, match="task.(train_mix|num_kv_pairs)="):
        tasks.load("mqar", mqar_config(train_mix=mix), tmp_path)


@pytest.mark.parametrize("key,value", [("source", "local"), ("num_train", 0), ("power_a", 0), ("data_seed", "x")])
def test_mqar_loader_names_a_bad_config_value(tmp_path, key, value):
    with pytest.raises(TaskError, match=f"task.{key}="):
        tasks.load("mqar", mqar_config(**{key: value}), tmp_path)


def test_zoology_preset_pairs_each_length_with_its_pairs_and_batch():
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        seen = {}
        for seq_len in (64, 128, 256):
            cfg = compose("config", overrides=["experiment=zoology_mqar", f"task.seq_len={seq_len}"],
                          return_hydra_config=True)
            seen[seq_len] = (cfg.task.num_kv_pairs, cfg.budget.batch_size)
            assert cfg.task.name == "mqar" and cfg.task.vocab_size == 8192 and cfg.model.num_layers == 2
        params = OmegaConf.to_container(cfg.hydra.sweeper.params)
    assert seen == {64: (4, 512), 128: (8, 512), 256: (16, 256)}
    assert params["task.seq_len"].split(",") == ["64", "128", "256"]
    assert params["model.d_model"].split(",") == ["64", "128", "256", "512"]
    assert len(params["budget.lr"].split(",")) == 4


# Selective copying -----------------------------------------------------------------------------

@pytest.mark.parametrize("seq_len,num_tokens,vocab_size", [(50, 6, 8), (300, 16, 16), (33, 16, 3)])
def test_selective_copying_targets_are_the_data_tokens_in_order(seq_len, num_tokens, vocab_size):
    inputs, labels = selective_copying.make(100, seq_len, num_tokens, vocab_size, seed=2)
    assert inputs.shape == labels.shape == (100, seq_len) and inputs.dtype == torch.int64
    noise, marker = selective_copying.NOISE, vocab_size
    for row, row_labels in zip(inputs.tolist(), labels.tolist()):
        content, tail = row[: seq_len - num_tokens], row[seq_len - num_tokens:]
        assert tail == [marker] * num_tokens and marker not in content
        data = [token for token in content if token != noise]
        assert len(data) == num_tokens
        assert all(2 <= token < marker for token in data)
        assert row_labels[seq_len - num_tokens:] == data
        assert set(row_labels[: seq_len - num_tokens]) == {IGNORE}


def test_selective_copying_spacing_varies_and_seeds_decide():
    inputs, _ = selective_copying.make(200, 100, 8, 16, seed=5)
    first_positions = (inputs[:, :92] != selective_copying.NOISE).int().argmax(dim=1)
    assert len(set(first_positions.tolist())) > 10, "data positions should vary between examples"
    assert torch.equal(inputs, selective_copying.make(200, 100, 8, 16, seed=5)[0])
    assert not torch.equal(inputs, selective_copying.make(200, 100, 8, 16, seed=6)[0])


def test_selective_copying_loader(tmp_path):
    data = tasks.load("selective_copying", copying_config(), tmp_path)
    assert (data.info.target, data.info.vocab_size, data.info.num_classes) == ("token", 9, 9)
    assert data.baseline == pytest.approx(1 / 6)
    item = data.test[0]
    assert item["input_ids"].shape == item["label"].shape == (50,)
    assert torch.equal(item["label"][-6:], item["input_ids"][:44][item["input_ids"][:44] != 1])
    with pytest.raises(TaskError, match="task.num_tokens=26"):
        tasks.load("selective_copying", copying_config(num_tokens=26), tmp_path)
