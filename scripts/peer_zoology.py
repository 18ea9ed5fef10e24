"""Peer check: Zoology's own model and trainer beside the suite's, on the board's data and budget.

The board's recall rows are only as good as the recall model around each method. This script runs
the reference implementation (Zoology, Arora et al. 2023; its ``Based`` mixer is Based's Taylor
map, its ``pos_elu`` map is linear attention's elu + 1) on the very splits the suite trains on, at
the board's state-bound point (``point=cpu_mqar_64x16``: MQAR, 64 tokens, 16 pairs, vocabulary
512, 20,000 training examples, batch 64, AdamW with weight decay 0.1, at most 6,000 steps, stopped
once validation accuracy passes 99%), and the suite's own command beside it, and writes both
results side by side.

    python scripts/peer_zoology.py --zoology /path/to/zoology-checkout --out peer.json \\
        [--rows taylor8 taylor16 linear32] [--lrs 1e-3 3e-3 1e-2] [--seed 0] [--sides zoology suite suite_zoology]

``--sides zoology_pytorch_init`` runs Zoology's model and trainer with PyTorch's default
initialisation instead of Zoology's own (the one difference measured to move linear attention).
``--sides suite_zoology`` is the suite under Zoology's recipe (``recipe=zoology``: DESIGN.md, "The
recipe"), the suite's own code with every switch set to what Zoology's code does.

Zoology's side is its ``LanguageModel`` (a ``Hybrid`` of ``BaseConv`` then the mixer, two blocks,
no position embeddings, identity state mixer, its ``_init_weights``) trained by its ``Trainer``
(AdamW, cosine over epochs, no warm-up, no clipping, validation each epoch, early stop at 99%);
its epochs are the suite's steps cut into passes over the training split, and as many whole
epochs as fit in the step budget. Test accuracy is the final model's on the suite's test split
(Zoology keeps the last model). The suite's side is ``python -m suite`` with the same point, rate
and seed, one thread: the board's own record of that run when ``results/`` holds one (the board's
seed-0 sweep runs these configs), else a run into a scratch folder; its record gives test accuracy
at the best validation step.

Not a test dependency: Zoology is not installed with the suite. It needs ``einops`` and
``opt_einsum`` (pip), and ``wandb`` and ``pandas``, which the suite's test extra brings; its only
GPU-era import, torchvision's ``StochasticDepth`` (drop_path, 0 here), gets a stand-in when
torchvision is absent (torchvision's wheel does not load beside the suite's CPU torch).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import types
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parent.parent
POINT = "cpu_mqar_64x16"
# The suite's sides: the overrides each adds to the row's.
SUITE_SIDES = {"suite": [], "suite_zoology": ["recipe=zoology"]}
SIDES = ["zoology", "zoology_pytorch_init", *SUITE_SIDES]

# A row: the suite's overrides and Zoology's mixer for the same method and state.
ROWS = {
    "taylor8": {"suite": ["method=taylor", "method.options.feature_dim=8"],
                "d_model": 64, "feature_name": "taylor_exp", "feature_dim": 8},
    "taylor16": {"suite": ["method=taylor", "method.options.feature_dim=16"],
                 "d_model": 64, "feature_name": "taylor_exp", "feature_dim": 16},
    "linear32": {"suite": ["method=linear", "model.d_model=32"],
                 "d_model": 32, "feature_name": "pos_elu", "feature_dim": 32},
    # Zoology's Performer map (256 positive random features of q, k projected to 16) beside the
    # suite's FAVOR+ at its default state (head-wide q, k): not the same state, the same kind of map.
    "performer16": {"suite": ["method=favor"],
                    "d_model": 64, "feature_name": "performer", "feature_dim": 16},
}


def stand_in_torchvision() -> None:
    """torchvision.ops.StochasticDepth at p = 0 (the identity), if torchvision cannot be imported."""
    try:
        import torchvision.ops  # noqa: F401
        return
    except Exception:
        pass

    class StochasticDepth(torch.nn.Module):
        def __init__(self, p: float, mode: str) -> None:
            super().__init__()
            if p:
                raise NotImplementedError("the stand-in StochasticDepth does p = 0 only")

        def forward(self, x):
            return x

    vision, ops = types.ModuleType("torchvision"), types.ModuleType("torchvision.ops")
    ops.StochasticDepth, vision.ops = StochasticDepth, ops
    sys.modules.update({"torchvision": vision, "torchvision.ops": ops})


def board_config(extra: list[str]) -> dict:
    """The suite's config at the board point with ``extra`` overrides, as ``python -m suite`` composes it."""
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from suite.groups import store

    store()  # the method group is made from the classes
    with initialize_config_dir(str(REPO / "suite" / "conf"), version_base=None):
        return OmegaConf.to_container(compose("config", overrides=[f"point={POINT}", *extra]), resolve=True)


def board_data(extra: list[str]):
    """The suite's splits and config at the board point, exactly as its train job loads them."""
    from suite.training import load_data

    config = board_config(extra)
    return config, load_data(config)


def board_record(row: dict, lr: float, seed: int, extra: list[str]) -> Path | None:
    """The board's own record of the suite's side of this run, when results/ holds one (the same
    config hash): the board's seed-0 sweep runs these very configs."""
    import methods
    from suite import records
    from suite.run import find_finished, with_method_version

    config = board_config([*row["suite"], *extra, f"budget.lr={lr}", f"seed={seed}", "cpu_threads=1"])
    config = with_method_version(config, methods.get(config["method"]["name"]))
    return find_finished(REPO / "results", records.config_hash(config, "cpu"))


def zoology_model(row: dict, vocab_size: int, seq_len: int):
    from zoology import model as zoology_models
    from zoology.config import ModelConfig, ModuleConfig

    # Newer Zoology builds its embeddings on device="cuda" by default: the one CPU stand-in needed.
    init = zoology_models.TokenEmbeddings.__init__
    init.__defaults__ = tuple("cpu" if d == "cuda" else d for d in init.__defaults__)

    conv = {"name": "zoology.mixers.base_conv.BaseConv",
            "kwargs": {"l_max": seq_len, "kernel_size": 3, "implicit_long_conv": True}}
    mixer = {"name": "zoology.mixers.based.Based",
             "kwargs": {"l_max": seq_len, "feature_dim": row["feature_dim"], "feature_name": row["feature_name"],
                        "num_key_value_heads": 1, "num_heads": 1, "train_view": "quadratic"}}
    config = ModelConfig(block_type="TransformerBlock", d_model=row["d_model"], n_layers=2,
                         sequence_mixer=ModuleConfig(name="zoology.mixers.hybrid.Hybrid",
                                                     kwargs={"configs": [conv, mixer]}),
                         state_mixer=ModuleConfig(name="torch.nn.Identity", kwargs={}),
                         max_position_embeddings=0, vocab_size=vocab_size)
    return zoology_models.LanguageModel(config)


def loader(split, batch_size: int, shuffle: bool, seed: int):
    """(inputs, targets, slices) batches as Zoology's trainer reads them."""
    items = [split[i] for i in range(len(split))]
    dataset = torch.utils.data.TensorDataset(torch.stack([item["input_ids"] for item in items]),
                                             torch.stack([item["label"] for item in items]))
    generator = torch.Generator().manual_seed(seed)

    def collate(rows):
        inputs, targets = zip(*rows)
        return torch.stack(inputs), torch.stack(targets), [{}] * len(rows)

    return torch.utils.data.DataLoader(dataset, batch_size=batch_size, shuffle=shuffle, generator=generator,
                                       collate_fn=collate)


class CurveLogger:
    """Zoology's logger interface; keeps the validation accuracy of each epoch."""

    def __init__(self) -> None:
        self.curve: list[float] = []

    def log(self, metrics: dict) -> None:
        if "valid/accuracy" in metrics:
            self.curve.append(float(metrics["valid/accuracy"]))


def pytorch_init(model: torch.nn.Module) -> None:
    """Every module back to PyTorch's default initialisation (the suite's), in place of Zoology's
    ``_init_weights`` (N(0, 0.02) linears and embeddings, zero biases, rescaled output projections)."""
    for module in model.modules():
        if hasattr(module, "reset_parameters"):
            module.reset_parameters()


def run_zoology(row: dict, lr: float, seed: int, init: str = "zoology") -> dict:
    config, data = board_data(row["suite"])
    stand_in_torchvision()  # after the data is loaded: `datasets` probes for the real torchvision
    from zoology.train import Trainer
    from zoology.utils import set_determinism

    budget = config["budget"]
    set_determinism(seed)
    model = zoology_model(row, data.info.vocab_size, data.info.seq_len)
    if init == "pytorch":
        pytorch_init(model)
    model.to = lambda *args, **kwargs: model  # Based's pinned Trainer.fit moves the model to "cuda" unconditionally
    train = loader(data.train, budget["batch_size"], True, seed)
    steps_per_epoch = len(train)
    epochs = max(1, budget["max_steps"] // steps_per_epoch)
    logger = CurveLogger()
    trainer = Trainer(model=model, train_dataloader=train,
                      test_dataloader=loader(data.val, budget["batch_size"], False, seed),
                      max_epochs=epochs, learning_rate=lr, weight_decay=budget["weight_decay"],
                      early_stopping_metric="valid/accuracy",
                      early_stopping_threshold=budget["target_val_accuracy"], device="cpu", logger=logger)
    trainer.fit()
    trainer.test_dataloader = loader(data.test, budget["batch_size"], False, seed)
    test_accuracy = trainer.test(len(logger.curve))["valid/accuracy"]
    logger.curve.pop()  # the line above logged the test split as an epoch
    best = max(range(len(logger.curve)), key=logger.curve.__getitem__)
    return {"test_accuracy": float(test_accuracy), "best_val_accuracy": logger.curve[best],
            "best_step": (best + 1) * steps_per_epoch, "steps": len(logger.curve) * steps_per_epoch,
            "val_curve": logger.curve, "steps_per_epoch": steps_per_epoch}


def run_suite(row: dict, lr: float, seed: int, extra: list[str]) -> dict:
    found = board_record(row, lr, seed, extra)
    if found is not None:
        record, source = json.loads(found.read_text()), str(found.relative_to(REPO))
    else:
        with tempfile.TemporaryDirectory() as results:
            command = [sys.executable, "-m", "suite", f"point={POINT}", *row["suite"], *extra, f"budget.lr={lr}",
                       f"seed={seed}", "cpu_threads=1", f"results_dir={results}", "logger=none"]
            subprocess.run(command, cwd=REPO, check=True, stdout=subprocess.DEVNULL)
            record, source = json.loads(next(Path(results).rglob("*.json")).read_text()), "run here"
    metrics = record["metrics"]
    return {"status": record["status"], "test_accuracy": metrics.get("test_accuracy"),
            "best_val_accuracy": metrics.get("val_accuracy"), "best_step": metrics.get("best_step"),
            "steps": metrics.get("steps"), "config_hash": record["config_hash"],
            "git_commit": record["env"].get("git_commit"), "source": source}


def table(results: list[dict]) -> str:
    sides = [side for side in SIDES if any(side in r for r in results)]
    lines = ["| row | lr | seed | " + " | ".join(f"{side}: test % (best step)" for side in sides) + " |",
             "|---|---|---|" + "---|" * len(sides)]
    for r in results:
        cells = []
        for side in sides:
            got = r.get(side)
            cells.append("—" if got is None else f"{100 * got['test_accuracy']:.1f} ({got['best_step']})")
        lines.append(f"| {r['row']} | {r['lr']:g} | {r['seed']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--zoology", type=Path, required=True, help="a Zoology checkout (its root folder)")
    parser.add_argument("--rows", nargs="+", default=list(ROWS), choices=list(ROWS))
    parser.add_argument("--lrs", nargs="+", type=float, default=[1e-3, 3e-3, 1e-2])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--sides", nargs="+", default=["zoology", "suite", "suite_zoology"], choices=SIDES)
    parser.add_argument("--suite-override", action="append", default=[],
                        help="an extra override for the suite's sides (repeatable)")
    parser.add_argument("--out", type=Path, required=True,
                        help="JSON file the results are written to, run by run; runs it holds already are skipped")
    parser.add_argument("--force", action="store_true", help="rerun the runs --out holds already")
    args = parser.parse_args(argv)
    if not (args.zoology / "zoology" / "model.py").is_file():
        parser.error(f"--zoology {args.zoology}: no zoology/model.py there; give the root of a Zoology checkout")
    torch.set_num_threads(1)
    os.environ.setdefault("TQDM_DISABLE", "1")  # Zoology's per-step bars; this script prints a line per run
    sys.path.insert(0, str(args.zoology.resolve()))
    sys.path.insert(0, str(REPO))
    commit = subprocess.run(["git", "-C", str(args.zoology), "rev-parse", "HEAD"], capture_output=True,
                            text=True).stdout.strip() or None
    results = json.loads(args.out.read_text())["runs"] if args.out.exists() else []
    for name in args.rows:
        for lr in args.lrs:
            entry = next((r for r in results if r["row"] == name and math.isclose(r["lr"], lr)
                          and r["seed"] == args.seed), None)
            if entry is None:
                entry = {"row": name, "lr": lr, "seed": args.seed}
                results.append(entry)
            for side in args.sides:
                if side in entry and not args.force:
                    print(f"peer: {name} lr {lr:g} seed {args.seed}: {side} done already (--force reruns it)")
                    continue
                print(f"peer: {name} lr {lr:g} seed {args.seed}: {side}", flush=True)
                entry[side] = (run_suite(ROWS[name], lr, args.seed, [*SUITE_SIDES[side], *args.suite_override])
                               if side in SUITE_SIDES
                               else run_zoology(ROWS[name], lr, args.seed,
                                                init="pytorch" if side == "zoology_pytorch_init" else "zoology"))
                args.out.write_text(json.dumps({"zoology_commit": commit, "point": POINT, "runs": results},
                                               indent=1))
    print(table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
