"""The run page's command reproduces a record's run exactly: composed, it gives the config the
record holds (the same config hash under today's rule), for every record committed under results/,
and a committed record's config reruns at its budget."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

import methods
from suite import record_store, records
from suite.run import with_method_version
from suite.site.runs import load_runs, reproduce_command

REPO = Path(__file__).resolve().parents[1]
CONF_DIR = REPO / "conf"
COMMITTED = sorted(load_runs(REPO / "results")[0], key=lambda r: str(r.source))


def shape(run) -> tuple:
    """What a reproduce command's composition depends on: the record's kind, task, method, budget,
    recipe and model, and which method options and task keys it sets (not their values)."""
    config = run.record["config"]
    return (run.kind, run.task, run.method, run.budget, run.recipe, (config.get("model") or {}).get("name"),
            tuple(sorted((config.get("method") or {}).get("options") or {})), tuple(sorted(config.get("task") or {})))


# The default run composes one record of each shape; CI's slow step composes every other one (the
# boards add hundreds of records, each a Hydra composition).
SAMPLE = list({shape(r): r for r in COMMITTED}.values())
OTHERS = [r for r in COMMITTED if all(r is not s for s in SAMPLE)]


def composed(command: str, tmp_path: Path) -> dict:
    """The config ``command`` composes (its overrides after ``python -m suite``)."""
    overrides = shlex.split(command)[3:]
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        config = compose("config", overrides=[*overrides, f"results_dir={tmp_path}"])
    return OmegaConf.to_container(config, resolve=True)


def test_every_committed_record_is_on_the_list():
    # Every record file under results/ is a run the site lists (none dropped as unreadable), and the
    # board holds every kind of record, so the parametrised checks below cover each kind.
    assert len(COMMITTED) == len(list((REPO / "results").rglob("*.json")))
    assert {r.kind for r in COMMITTED} == {"train", "kernel", "fidelity", "decode", "cost"}


@pytest.mark.parametrize("run", [*SAMPLE, *(pytest.param(r, marks=pytest.mark.slow) for r in OTHERS)],
                         ids=lambda r: str(r.source))
def test_the_reproduce_command_composes_the_recorded_config(run, tmp_path):
    # As suite.run does before it hashes: today's code version of the method joins the config.
    config = composed(reproduce_command(run), tmp_path)
    config = with_method_version(config, methods.get(config["method"]["name"]))
    assert records.config_hash(config, run.model.env.device) == records.record_config_hash(run.record)


@pytest.mark.parametrize("run", [r for r in COMMITTED if r.kind == "train"], ids=lambda r: str(r.source))
def test_options_and_overrides_are_in_the_command(run):
    """Each setting a train record ran with is spelled out: its model width, its learning rate (the
    swept one) and every option of its method, so the command does not lean on today's defaults."""
    command, config = reproduce_command(run), run.record["config"]
    assert f"model.d_model={config['model']['d_model']}" in command
    assert f"budget.lr={config['budget']['lr']!r}" in command
    for option in config["method"]["options"]:
        assert f"method.options.{option}=" in command


@pytest.mark.slow
def test_a_committed_record_reruns_at_its_budget(tmp_path, data_dir, monkeypatch):
    from suite.run import run as run_config

    # The quickest committed train run, whatever the board's stage: the test needs one, not a task.
    run = min((r for r in COMMITTED if r.kind == "train"), key=lambda r: r.record["metrics"]["wall_time_s"])
    config = composed(reproduce_command(run), tmp_path)
    config["data_dir"] = str(data_dir)
    path, outcome = run_config(config, resume=False)
    rerun = record_store.read_record(path)
    assert outcome.status == "ok" and records.record_config_hash(rerun) == records.record_config_hash(run.record)
    # The same computation on the same kind of machine: the accuracies of a deterministic CPU run,
    # up to the float reassociation of code changed since (the record's git commit says which).
    assert rerun["metrics"]["test_accuracy"] == pytest.approx(run.record["metrics"]["test_accuracy"], abs=0.03)
