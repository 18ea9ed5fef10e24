"""The train/eval loop: AdamW, warmup + cosine, clipping, periodic validation, test at the best
validation step. Returns the run's status and metrics; writing the record is the caller's job."""

from __future__ import annotations

import copy
import math
import statistics
import time
from collections.abc import Mapping
from contextlib import nullcontext
from pathlib import Path

import torch
from torch.utils.data import DataLoader
from tqdm.auto import tqdm

import tasks
from methods.base import AttentionMethod
from suite import checkpoint, logger, records
from suite.data import capped, collate, real_tokens
from suite.hardware import RunMemory, synchronize
from suite.metrics import format_value
from suite.model import build_model, token_loss
from suite.modes.train import RECORD_METRICS
from suite.run import JobResult, Outcome, is_out_of_memory
from tasks.base import TaskData

SPLIT_LIMITS = ("num_train", "num_val", "num_test")


def lr_factor(step: int, warmup: int, total: int) -> float:
    """Linear warm-up to 1, then cosine decay to 0 at ``total``."""
    if step < warmup:
        return (step + 1) / warmup
    progress = (step - warmup) / max(1, total - warmup)
    return 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress)))


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


def train(config: Mapping, data: TaskData, device: torch.device) -> tuple[Outcome, torch.nn.Module]:
    """Train ``config['method']`` on ``data`` under ``config['budget']``; return the outcome and the
    model (holding the weights of the best validation step when the run is ok). Saves a checkpoint
    every ``budget.checkpoint_every`` steps and when stopped by a signal; continues from the
    newest one of this config unless ``resume`` is false."""
    budget, seed = config["budget"], config["seed"]
    target = budget.get("target_val_accuracy")
    cap = config.get("memory_cap_bytes")  # null, or the peak (as the record measures it) that is oom
    started = time.perf_counter()
    torch.manual_seed(seed)
    model = build_model(config["task"]["backbone"], data.info, config["model"], config["method"]).to(device)
    param_count = sum(p.numel() for p in model.parameters())
    optimizer = torch.optim.AdamW(model.parameters(), lr=budget["lr"], weight_decay=budget["weight_decay"])
    total_steps = budget["max_steps"]
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
    outcome = Outcome()
    step_times: list[float] = []
    tokens = correct = scored = 0
    best_val, best_step, best_state = -1.0, 0, None
    last_finite_loss = None
    val_curve: list[list] = []  # [step, validation accuracy] at every evaluation: where a plateau shows
    batches = iter(())
    step = 0
    # The data order is the shuffling generator at the start of the epoch plus the batches used since.
    epoch_start, epoch_batches = order.get_state(), 0
    config_hash = records.config_hash(config, device.type)
    saves_to, every = checkpoint.folder(config["results_dir"], config_hash), budget.get("checkpoint_every")

    def state() -> dict:
        """All the rest of the run depends on, between two steps."""
        return {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict(),
                "rng": checkpoint.rng_states(device), "epoch_start": epoch_start, "epoch_batches": epoch_batches,
                "counters": {"step": step, "tokens": tokens, "correct": correct, "scored": scored,
                             "last_finite_loss": last_finite_loss, "step_times": step_times, "val_curve": val_curve,
                             "train_wall_time_s": time.perf_counter() - started},
                "best": {"val": best_val, "step": best_step, "state": best_state}}

    memory = RunMemory(device)  # from here on: what the run adds to the built model and data
    found = checkpoint.latest(saves_to, config_hash) if config.get("resume", True) else None
    if found is not None:
        path, saved = found
        model.load_state_dict(saved["model"])
        optimizer.load_state_dict(saved["optimizer"])
        scheduler.load_state_dict(saved["scheduler"])
        counters, best = saved["counters"], saved["best"]
        step, tokens, correct, scored = counters["step"], counters["tokens"], counters["correct"], counters["scored"]
        last_finite_loss, step_times = counters["last_finite_loss"], counters["step_times"]
        val_curve = counters.get("val_curve", [])
        started = time.perf_counter() - counters["train_wall_time_s"]
        best_val, best_step, best_state = best["val"], best["step"], best["state"]
        epoch_start, epoch_batches = saved["epoch_start"], saved["epoch_batches"]
        order.set_state(epoch_start)
        batches = iter(train_loader)
        for _ in range(epoch_batches):  # the same shuffle, from where the epoch was
            next(batches)
        checkpoint.set_rng_states(saved["rng"], device)
        print(f"resuming from step {step}: {path}", flush=True)
    bar = tqdm(total=total_steps, initial=step, desc=f"{config['method']['name']} on {data.info.name}",
               unit="step", dynamic_ncols=True, mininterval=0.5)
    try:
        model.train()
        with checkpoint.HeldSignals() as signals:
            while step < total_steps:
                batch = next(batches, None)
                if batch is None:  # a new epoch
                    epoch_start, epoch_batches = order.get_state(), 0
                    batches = iter(train_loader)
                    continue
                epoch_batches += 1
                batch = to_device(batch, device)
                t0 = time.perf_counter()
                with autocast(device):
                    logits, labels = model(batch)
                loss = token_loss(logits, labels)
                if not torch.isfinite(loss):
                    outcome.status = "diverged"
                    outcome.error = f"loss became {loss.item()} at step {step + 1}"
                    outcome.metrics.update(diverged_step=step + 1, last_finite_loss=last_finite_loss)
                    break
                loss.backward()
                if budget["grad_clip"] is not None:  # null: no clipping, as most LRA configs
                    torch.nn.utils.clip_grad_norm_(model.parameters(), budget["grad_clip"])
                optimizer.step()
                scheduler.step()
                optimizer.zero_grad(set_to_none=True)
                synchronize(device)
                step_times.append(time.perf_counter() - t0)
                check_memory_cap(cap, memory)
                step += 1
                last_finite_loss = loss.item()
                tokens += real_tokens(batch)
                c, n = correct_and_count(logits.detach(), labels)
                correct, scored = correct + c, scored + n
                bar.update(1)
                logger.current().log({"train/loss": last_finite_loss, "train/accuracy": c / max(1, n),
                                      "train/lr": scheduler.get_last_lr()[0]}, step=step)
                bar.set_postfix(loss=f"{last_finite_loss:.3f}", acc=f"{correct / max(1, scored):.3f}",
                                tok_s=f"{tokens / sum(step_times):,.0f}", refresh=False)
                if step % budget["eval_every"] == 0 or step == total_steps:
                    val = evaluate(model, eval_loader["val"], device, budget["eval_batches"])
                    logger.current().log({"val/accuracy": val}, step=step)
                    val_curve.append([step, val])
                    if val > best_val:
                        best_val, best_step = val, step
                        best_state = copy.deepcopy({k: v.detach().cpu() for k, v in model.state_dict().items()})
                    bar.write(f"step {step}: val acc {val:.4f} (best {best_val:.4f} at step {best_step})")
                    if target is not None and val >= target:  # solved: Zoology stops here too
                        bar.write(f"step {step}: val acc reached budget.target_val_accuracy={target}; stopping")
                        break
                if every is not None and (step % every == 0 or signals.pending):
                    checkpoint.save(saves_to, config_hash, step, state())
                signals.release()  # a signal that came during this step acts now, after its checkpoint
    except KeyboardInterrupt:
        outcome.status, outcome.error = "interrupted", f"interrupted after {step} steps"
    finally:
        bar.close()

    if outcome.status == "ok":
        model.load_state_dict(best_state)
        outcome.metrics.update(
            test_accuracy=evaluate(model, eval_loader["test"], device),
            val_accuracy=best_val,
            best_step=best_step,
        )
    outcome.metrics.update(
        baseline_accuracy=data.baseline,
        baseline_name=data.info.baseline_name,
        train_accuracy=correct / max(1, scored),
        final_train_loss=last_finite_loss,
        steps=step,
        train_tokens=tokens,
        train_tokens_per_s=tokens / sum(step_times) if step_times else None,
        median_step_time_s=statistics.median(step_times) if step_times else None,
        stopped_early=step < total_steps and outcome.status == "ok",
        peak_memory_bytes=memory.stop(),
        peak_memory_source=memory.source,
        val_curve=val_curve,
        param_count=param_count,
        cpu_threads=torch.get_num_threads() if device.type == "cpu" else None,
        train_wall_time_s=time.perf_counter() - started,
    )
    return outcome, model


def task_config(config: Mapping) -> dict:
    """The task group with the budget's split sizes written over the task's own (when set)."""
    merged = dict(config["task"])
    for key in SPLIT_LIMITS:
        if config["budget"][key] is not None:
            merged[key] = config["budget"][key]
    return merged


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


def recurrent_state_bytes(model: torch.nn.Module, seq_len: int) -> int:
    """Bytes of the decoding state each attention layer holds after a full-length prompt of one
    sequence, summed over layers, as the method itself builds it (``prefill_state``): the
    recurrent state size against which Zoology and Based plot recall (softmax: its KV cache)."""
    from suite.model import MultiHeadAttention
    from suite.modes.decode.job import state_bytes

    total = 0
    for layer in (m for m in model.modules() if isinstance(m, MultiHeadAttention)):
        shape = (1, layer.num_heads, seq_len, layer.attention.head_dim)
        with torch.no_grad():
            k, v = (torch.randn(shape, device=layer.qkv.weight.device) for _ in range(2))
            total += state_bytes(layer.attention.prefill_state(k, v))
    return total


def job(config: Mapping, device: torch.device) -> JobResult:
    """mode=train: train on the task, test at the best validation step."""
    tasks.loader(config["task"]["name"])  # unknown task: fail before any work
    data = load_data(config)
    resolved = None
    try:
        outcome, model = train(config, data, device)
        outcome.metrics["state_bytes"] = recurrent_state_bytes(model, data.info.seq_len)
        resolved = next(m for m in model.modules() if isinstance(m, AttentionMethod)).resolved_options()
    except Exception as exc:
        if not is_out_of_memory(exc):
            raise
        outcome = Outcome(status="oom", error=str(exc).strip().split("\n")[0] or "out of memory")
    info = data.info
    task = {"name": info.name, "family": info.family, "seq_len": info.seq_len,
            "vocab_size": info.vocab_size, "num_classes": info.num_classes, "target": info.target,
            "metric": info.metric, "num_train": len(data.train), "num_val": len(data.val),
            "num_test": len(data.test), **info.extra}
    return JobResult(kind="train", outcome=outcome, task=task, resolved=resolved)


def summary(record: Mapping) -> str:
    """The closing table: accuracy beside the task's baseline, then speed and memory."""
    m = record["metrics"]
    head = (f"{record['method']['name']} on {record['task']['name']} "
            f"({record['config']['budget']['name']} budget, {record['env']['device']}): {record['status']}")
    rows = []
    for metric in RECORD_METRICS:
        value = format_value(metric, m.get(metric.name))
        if metric.name == "baseline_accuracy":
            value += f" ({m.get('baseline_name', 'baseline')})"
        rows.append((metric.label, value))
    width = max(len(label) for label, _ in rows)
    lines = [head, "-" * len(head)] + [f"{label:<{width}}  {value}" for label, value in rows]
    if record["error"]:
        lines.append(f"{'error':<{width}}  {record['error']}")
    verdict = baseline_verdict(m.get("test_accuracy"), m.get("baseline_accuracy"), m.get("baseline_name"),
                               record["task"].get("num_test"))
    return "\n".join(lines + ([verdict] if verdict else []))


def baseline_verdict(accuracy: float | None, baseline: float | None, name: str | None,
                     num_test: int | None) -> str | None:
    """One sentence saying whether the test accuracy is clearly above the task's baseline: by more
    than two binomial standard errors of an accuracy measured on ``num_test`` examples."""
    if accuracy is None or baseline is None or not num_test:
        return None
    which = f"the baseline of {100 * baseline:.1f}%" + (f" ({name})" if name else "")
    two_se = 2 * math.sqrt(max(accuracy * (1 - accuracy), 1e-12) / num_test)
    if accuracy - two_se > baseline:
        return (f"test accuracy {100 * accuracy:.1f}% is above {which} by {100 * (accuracy - baseline):.1f} points "
                f"(two standard errors of the test accuracy: {100 * two_se:.1f})")
    return f"test accuracy {100 * accuracy:.1f}% is not above {which}: nothing was learned at this budget"
