"""The train/eval loop: AdamW, warmup + cosine, clipping, periodic validation, test at the best
validation step. Returns the run's status and metrics; writing the record is the caller's job.
A library, not a mode: the train mode's job and the fidelity mode's capture model both call it."""

from __future__ import annotations

import copy
import math
import statistics
import time
from collections.abc import Iterator, Mapping
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch.utils.data import DataLoader
from tqdm.auto import tqdm

import tasks
from suite import checkpoint, logger, recipe
from suite.data import capped, collate, real_tokens
from suite.errors import ConfigError
from suite.hardware import RunMemory, synchronize
from suite.job import Outcome
from suite.model import build_model, token_loss
from tasks.base import TaskData

SPLIT_LIMITS = tasks.SPLITS


def lr_factor(step: int, warmup: int, total: int) -> float:
    """Linear warm-up to 1, then cosine decay to 0 at ``total``."""
    if step < warmup:
        return (step + 1) / warmup
    progress = (step - warmup) / max(1, total - warmup)
    return 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress)))


def epoch_lr_factor(step: int, steps_per_epoch: int, total: int) -> float:
    """Zoology's schedule (recipe.schedule=epoch): cosine from 1 to 0 over the whole epochs that
    ``total`` steps hold, constant within an epoch (its trainer steps the scheduler once an epoch);
    the steps past the last whole epoch run at 0, where Zoology stops."""
    epochs = max(1, total // steps_per_epoch)
    return 0.5 * (1.0 + math.cos(math.pi * min(1.0, (step // steps_per_epoch) / epochs)))


def correct_and_count(logits: torch.Tensor, labels: torch.Tensor) -> tuple[int, int]:
    """Correct predictions and how many were made (a model returns only scored predictions)."""
    return int((logits.argmax(-1) == labels).sum()), labels.numel()


def check_memory_cap(cap: int | None, memory: RunMemory) -> None:
    """Raise MemoryError (recorded as status oom) once the run's peak memory is above ``cap``."""
    if cap is not None:
        peak = memory.peak()
        if peak > cap:
            raise MemoryError(f"peak memory {peak} bytes ({memory.source}) above memory_cap_bytes={cap}")


def autocast(device: torch.device):
    """bf16 autocast on CUDA; full float32 on the CPU."""
    return torch.autocast("cuda", dtype=torch.bfloat16) if device.type == "cuda" else nullcontext()


def to_device(batch: Mapping[str, torch.Tensor], device: torch.device) -> dict[str, torch.Tensor]:
    return {k: v.to(device, non_blocking=True) for k, v in batch.items()}


@torch.no_grad()
def evaluate(model, loader: DataLoader, device: torch.device, max_batches: int | None = None) -> float:
    """Accuracy over (the first ``max_batches`` batches of) ``loader``."""
    model.eval()
    correct = total = 0
    for i, batch in enumerate(loader):
        if max_batches is not None and i >= max_batches:
            break
        batch = to_device(batch, device)
        with autocast(device):
            logits, labels = model(batch)
        c, n = correct_and_count(logits, labels)
        correct, total = correct + c, total + n
    model.train()
    return correct / max(1, total)


@dataclass
class Run:
    """What a training run is built from once, before its first step: the model, its optimizer and
    schedule, the data loaders and the budget's limits."""

    device: torch.device
    budget: Mapping
    model: torch.nn.Module
    param_count: int
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LRScheduler
    order: torch.Generator  # shuffles the training set: its state at an epoch's start is where the epoch is
    train_loader: DataLoader
    eval_loader: dict[str, DataLoader]
    config_hash: str
    saves_to: Path  # this config's checkpoint folder
    target: float | None  # budget.target_val_accuracy: stop once validation reaches it; None = never
    cap: int | None  # memory_cap_bytes: the peak (as the record measures it) that is oom; None = no cap
    every: int | None  # budget.checkpoint_every; None = no checkpoints
    memory: RunMemory  # what the run adds to the built model and data

    @property
    def total_steps(self) -> int:
        return self.budget["max_steps"]


@dataclass
class Progress:
    """Everything a run changes from one step to the next; a checkpoint holds all of it but
    ``batches``, which is rebuilt from the epoch's start and the batches it has used."""

    started: float  # perf_counter at the run's start (moved back by the saved wall time on resume)
    epoch_start: torch.Tensor  # the shuffling generator's state when this epoch began
    epoch_batches: int = 0
    batches: Iterator = field(default_factory=lambda: iter(()))
    step: int = 0
    tokens: int = 0
    correct: int = 0
    scored: int = 0
    last_finite_loss: float | None = None
    step_times: list[float] = field(default_factory=list)
    val_curve: list[list] = field(default_factory=list)  # [step, validation accuracy] at every evaluation
    best_val: float = -1.0
    best_step: int = 0
    best_state: dict | None = None  # the weights at best_step, on the CPU


def train(config: Mapping, data: TaskData, device: torch.device, config_hash: str) -> tuple[Outcome, torch.nn.Module]:
    """Train ``config['method']`` on ``data`` under ``config['budget']``; return the outcome and the
    model (holding the weights of the best validation step when the run is ok). Saves a checkpoint
    every ``budget.checkpoint_every`` steps and when stopped by a signal; continues from the
    newest one of this config unless ``resume`` is false."""
    run, progress = build_run(config, data, device, config_hash)
    if config.get("resume", True):
        resume(run, progress)
    outcome = Outcome()
    bar = tqdm(total=run.total_steps, initial=progress.step, desc=f"{config['method']['name']} on {data.info.name}",
               unit="step", dynamic_ncols=True, mininterval=0.5)
    try:
        run_steps(run, progress, outcome, bar)
    except KeyboardInterrupt:
        outcome.status, outcome.error = "interrupted", f"interrupted after {progress.step} steps"
    finally:
        bar.close()
    finish(run, progress, outcome, data)
    return outcome, run.model


def build_run(config: Mapping, data: TaskData, device: torch.device, config_hash: str) -> tuple[Run, Progress]:
    """The model (initialised from the seed), AdamW with warm-up + cosine, and the loaders, in the
    order that fixes every random draw; then the memory measure, from the built run on."""
    budget, seed = config["budget"], config["seed"]
    started = time.perf_counter()
    torch.manual_seed(seed)
    model = build_model(config["task"]["backbone"], data.info, config["model"], config["method"],
                        recipe.of(config)).to(device)
    param_count = sum(p.numel() for p in model.parameters())
    optimizer = torch.optim.AdamW(model.parameters(), lr=budget["lr"], weight_decay=budget["weight_decay"])
    total_steps = budget["max_steps"]
    if recipe.of(config)["schedule"] == "epoch":
        steps_per_epoch = math.ceil(len(data.train) / budget["batch_size"])  # the loader's batches
        scheduler = torch.optim.lr_scheduler.LambdaLR(
            optimizer, lambda s: epoch_lr_factor(s, steps_per_epoch, total_steps))
    else:
        scheduler = torch.optim.lr_scheduler.LambdaLR(
            optimizer, lambda s: lr_factor(s, budget["warmup_steps"], total_steps)
        )
    order = torch.Generator().manual_seed(seed)
    train_loader = DataLoader(data.train, batch_size=budget["batch_size"], shuffle=True,
                              generator=order, collate_fn=collate)
    eval_loader = {
        name: DataLoader(split, batch_size=budget["batch_size"], collate_fn=collate)
        for name, split in (("val", data.val), ("test", data.test))
    }
    progress = Progress(started=started, epoch_start=order.get_state())
    run = Run(device=device, budget=budget, model=model, param_count=param_count, optimizer=optimizer,
              scheduler=scheduler, order=order, train_loader=train_loader, eval_loader=eval_loader,
              config_hash=config_hash, saves_to=checkpoint.folder(config["results_dir"], config_hash),
              target=budget.get("target_val_accuracy"), cap=config.get("memory_cap_bytes"),
              every=budget.get("checkpoint_every"),
              memory=RunMemory(device))  # last: it measures what the run adds to the built model and data
    return run, progress


def checkpoint_state(run: Run, progress: Progress) -> dict:
    """All the rest of the run depends on, between two steps. Its keys are the checkpoint format
    (checkpoint.FORMAT): ``resume`` reads them back."""
    return {"model": run.model.state_dict(), "optimizer": run.optimizer.state_dict(),
            "scheduler": run.scheduler.state_dict(), "rng": checkpoint.rng_states(run.device),
            "epoch_start": progress.epoch_start, "epoch_batches": progress.epoch_batches,
            "counters": {"step": progress.step, "tokens": progress.tokens, "correct": progress.correct,
                         "scored": progress.scored, "last_finite_loss": progress.last_finite_loss,
                         "step_times": progress.step_times, "val_curve": progress.val_curve,
                         "train_wall_time_s": time.perf_counter() - progress.started},
            "best": {"val": progress.best_val, "step": progress.best_step, "state": progress.best_state}}


def resume(run: Run, progress: Progress) -> None:
    """Go on from this config's newest checkpoint, if there is one: the weights, optimizer and
    schedule, the counters, the data order (the same shuffle, from where the epoch was) and every
    random generator."""
    found = checkpoint.latest(run.saves_to, run.config_hash)
    if found is None:
        return
    path, saved = found
    run.model.load_state_dict(saved["model"])
    run.optimizer.load_state_dict(saved["optimizer"])
    run.scheduler.load_state_dict(saved["scheduler"])
    counters, best = saved["counters"], saved["best"]
    progress.step, progress.tokens = counters["step"], counters["tokens"]
    progress.correct, progress.scored = counters["correct"], counters["scored"]
    progress.last_finite_loss, progress.step_times = counters["last_finite_loss"], counters["step_times"]
    progress.val_curve = counters.get("val_curve", [])  # absent from checkpoints older than the curve
    progress.started = time.perf_counter() - counters["train_wall_time_s"]
    progress.best_val, progress.best_step, progress.best_state = best["val"], best["step"], best["state"]
    progress.epoch_start, progress.epoch_batches = saved["epoch_start"], saved["epoch_batches"]
    run.order.set_state(progress.epoch_start)
    progress.batches = iter(run.train_loader)
    for _ in range(progress.epoch_batches):
        next(progress.batches)
    checkpoint.set_rng_states(saved["rng"], run.device)
    print(f"resuming from step {progress.step}: {path}", flush=True)


def run_steps(run: Run, progress: Progress, outcome: Outcome, bar: tqdm) -> None:
    """Steps until the budget's last, a non-finite loss (the outcome says diverged) or the target
    validation accuracy; a checkpoint every ``budget.checkpoint_every`` steps and at a signal,
    which acts only after it (KeyboardInterrupt)."""
    run.model.train()
    with checkpoint.HeldSignals() as signals:
        while progress.step < run.total_steps:
            counts = train_step(run, progress, next_batch(run, progress), outcome)
            if counts is None:
                break
            report_step(run, progress, bar, *counts)
            if progress.step % run.budget["eval_every"] == 0 or progress.step == run.total_steps:
                if validate(run, progress, bar):
                    break
            if run.every is not None and (progress.step % run.every == 0 or signals.pending):
                checkpoint.save(run.saves_to, run.config_hash, progress.step, checkpoint_state(run, progress))
            signals.release()  # a signal that came during this step acts now, after its checkpoint


def next_batch(run: Run, progress: Progress) -> dict[str, torch.Tensor]:
    """The next training batch, on the device; at an epoch's end a new epoch begins (the data
    order is the shuffling generator at the epoch's start plus the batches used since)."""
    batch = next(progress.batches, None)
    while batch is None:
        progress.epoch_start, progress.epoch_batches = run.order.get_state(), 0
        progress.batches = iter(run.train_loader)
        batch = next(progress.batches, None)
    progress.epoch_batches += 1
    return to_device(batch, run.device)


def train_step(run: Run, progress: Progress, batch: dict[str, torch.Tensor],
               outcome: Outcome) -> tuple[int, int] | None:
    """One optimizer step on ``batch``, counted into ``progress``; returns the step's correct and scored
    predictions, or None, with the outcome diverged and nothing updated, when the loss is not finite."""
    t0 = time.perf_counter()
    with autocast(run.device):
        logits, labels = run.model(batch)
    loss = token_loss(logits, labels)
    if not torch.isfinite(loss):
        outcome.status = "diverged"
        outcome.error = f"loss became {loss.item()} at step {progress.step + 1}"
        outcome.metrics.update(diverged_step=progress.step + 1, last_finite_loss=progress.last_finite_loss)
        return None
    loss.backward()
    if run.budget["grad_clip"] is not None:  # null: no clipping, as most LRA configs
        torch.nn.utils.clip_grad_norm_(run.model.parameters(), run.budget["grad_clip"])
    run.optimizer.step()
    run.scheduler.step()
    run.optimizer.zero_grad(set_to_none=True)
    synchronize(run.device)
    progress.step_times.append(time.perf_counter() - t0)
    check_memory_cap(run.cap, run.memory)
    progress.step += 1
    progress.last_finite_loss = loss.item()
    progress.tokens += real_tokens(batch)
    c, n = correct_and_count(logits.detach(), labels)
    progress.correct, progress.scored = progress.correct + c, progress.scored + n
    return c, n


def report_step(run: Run, progress: Progress, bar: tqdm, correct: int, scored: int) -> None:
    """The step's loss, accuracy and learning rate to the logger; the running figures on the bar."""
    bar.update(1)
    logger.current().log({"train/loss": progress.last_finite_loss, "train/accuracy": correct / max(1, scored),
                          "train/lr": run.scheduler.get_last_lr()[0]}, step=progress.step)
    bar.set_postfix(loss=f"{progress.last_finite_loss:.3f}", acc=f"{progress.correct / max(1, progress.scored):.3f}",
                    tok_s=f"{progress.tokens / sum(progress.step_times):,.0f}", refresh=False)


def validate(run: Run, progress: Progress, bar: tqdm) -> bool:
    """Validation accuracy at this step, keeping the weights of the best; True once it reaches
    budget.target_val_accuracy (solved: Zoology stops here too)."""
    val = evaluate(run.model, run.eval_loader["val"], run.device, run.budget["eval_batches"])
    logger.current().log({"val/accuracy": val}, step=progress.step)
    progress.val_curve.append([progress.step, val])
    if val > progress.best_val:
        progress.best_val, progress.best_step = val, progress.step
        progress.best_state = copy.deepcopy({k: v.detach().cpu() for k, v in run.model.state_dict().items()})
    bar.write(f"step {progress.step}: val acc {val:.4f} (best {progress.best_val:.4f} at step {progress.best_step})")
    if run.target is not None and val >= run.target:
        bar.write(f"step {progress.step}: val acc reached budget.target_val_accuracy={run.target}; stopping")
        return True
    return False


def finish(run: Run, progress: Progress, outcome: Outcome, data: TaskData) -> None:
    """The run's metrics; an ok run is tested with the weights of its best validation step."""
    if outcome.status == "ok":
        run.model.load_state_dict(progress.best_state)
        outcome.metrics.update(
            test_accuracy=evaluate(run.model, run.eval_loader["test"], run.device),
            val_accuracy=progress.best_val,
            best_step=progress.best_step,
        )
        if data.length_tests:
            outcome.metrics["length_accuracy"] = test_at_lengths(run, data)
    outcome.metrics.update(
        baseline_accuracy=data.baseline,
        baseline_name=data.info.baseline_name,
        train_accuracy=progress.correct / max(1, progress.scored),
        final_train_loss=progress.last_finite_loss,
        steps=progress.step,
        train_tokens=progress.tokens,
        train_tokens_per_s=progress.tokens / sum(progress.step_times) if progress.step_times else None,
        median_step_time_s=statistics.median(progress.step_times) if progress.step_times else None,
        stopped_early=progress.step < run.total_steps and outcome.status == "ok",
        peak_memory_bytes=run.memory.stop(),
        peak_memory_source=run.memory.source,
        val_curve=progress.val_curve,
        param_count=run.param_count,
        cpu_threads=torch.get_num_threads() if run.device.type == "cpu" else None,
        train_wall_time_s=time.perf_counter() - progress.started,
    )


def test_at_lengths(run: Run, data: TaskData) -> list[dict]:
    """Accuracy of the best weights on each longer test split (``task.test_lengths``), beside its baseline."""
    return [{"seq_len": test.seq_len, **test.extra, "baseline_accuracy": test.baseline,
             "accuracy": evaluate(run.model, DataLoader(test.split, batch_size=run.budget["batch_size"],
                                                        collate_fn=collate), run.device)}
            for test in data.length_tests]


def check_length_tests(config: Mapping, data: TaskData) -> None:
    """A model with learned position embeddings cannot run past ``task.seq_len``: longer test lengths
    (``task.test_lengths``) need one without (ConfigError, before any work)."""
    if data.length_tests and config["model"].get("position", "learned") == "learned":
        raise ConfigError(f"task.test_lengths tests at lengths up to {max(t.seq_len for t in data.length_tests)}, "
                          f"but learned position embeddings stop at task.seq_len={data.info.seq_len}; "
                          f"use a model with position: none (e.g. model=hybrid)")


def task_config(config: Mapping) -> dict:
    """The task group with the budget's split sizes written over the task's own (when set)."""
    return tasks.data_config(config["task"], config["budget"])


def load_data(config: Mapping) -> TaskData:
    """The task's splits, capped to the budget's sizes."""
    import datasets

    datasets.disable_progress_bars()  # the run's own bar is the one to watch
    load_task = tasks.loader(config["task"]["name"])
    tcfg = task_config(config)
    data = load_task(tcfg, Path(config["data_dir"]).expanduser())
    data.train, data.val, data.test = (
        capped(split, tcfg.get(key)) for split, key in zip((data.train, data.val, data.test), SPLIT_LIMITS)
    )
    return data
