"""The leaderboard's numbers. Rows are a method's configuration (method, budget, device, dtype);
columns are board points (task, length, key-value pairs, model). A cell shows one configuration's
runs: a rerun of one config counts once, a learning-rate sweep shows only the rate it chose, and
mean and spread are over distinct seeds. LRA's average follows its published rule."""

from __future__ import annotations

import math
import re
import statistics
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from suite import board as boards
from suite import recipe as recipes
from suite.modes import declared
from suite.records import cell_key, select_lr
from suite.site import known, reference, stats
from suite.site.runs import Run, number, safe_name

ACCURACY = declared("train")["test_accuracy"]
SUITE_RECIPE = recipes.label({})  # 'suite': the recipe of the board's own rows (and of records before recipes)
TEST_BUDGETS = ("smoke",)  # budgets of test runs: they check that the code runs, not what it learns
LRA_TASKS = reference.AVERAGE_OVER  # Path-X is excluded from LRA's average
LRA_RULE = (
    "LRA avg: the mean of the five LRA task means (" + ", ".join(LRA_TASKS) + "), Path-X excluded, "
    "as in Tay et al. 2021; shown only when a row has all five."
)
CLEAR_RULE = (
    "A cell is clearly above its baseline when the board's comparison test (TEST, under the first screen) "
    "finds its mean above the baseline: Welch's t over n ≥ 2 seeds with the test set's binomial sampling error "
    "added. Any other cell is greyed and marked: n=1 is untested (one seed gives no spread), and a mean the test "
    "cannot separate from the baseline is ≈ baseline. A cell whose every seed lies within the baseline's own "
    "sampling error on the test set did not learn: it is shown apart and never ranked. On recall (MQAR) the "
    "baseline is 1 / key-value pairs, what copying any value of the context scores without binding keys to "
    "values, not chance over the vocabulary."
)
# What a cell's verdict says, beside its mean.
# What the state axis says of a method without a recurrent form (its records' method.capabilities).
NO_STATE = "not applicable: the method has no recurrent form, so no decoding state to size"
VERDICTS = {"above": "", "baseline": "≈ baseline", "untested": "n=1: untested", "no baseline": "no baseline"}
PLATEAU_RULE = (
    "Each seed's validation curve (metrics.val_curve) is read on its own, once the run ran to its budget's "
    "max_steps without stopping early. A seed is flat when no point of its curve is clearly above the baseline "
    "(above baseline + 2 binomial SE over its validation examples); it is still rising when its best validation "
    "accuracy came in the last tenth of its steps. A cell reads 'on the plateau at step N' when every seed is flat "
    "(the budget, not the method, ended it there), and 'still rising at step N' when a seed is still rising "
    "(N: the steps its runs took). A cell whose runs stopped early, or lack curves, gets neither label."
)
RISING_TAIL = 0.1  # a best validation step in the last tenth of a run's steps: still rising when the budget ended it
PROVENANCE_RULE = (
    "Every run of a cell should come from one commit of a clean checkout. A cell whose runs (the sweep's "
    "included) ran on a checkout with uncommitted changes (env.git_dirty) is marked 'dirty tree'; one whose "
    "runs come from several commits (env.git_commit) is marked with the number of commits. Both marks name "
    "the runs on hover."
)
TIER_RULE = (
    "Every row says where its runs come from. Verified: run by the project itself (its board command or its "
    "scheduled workflow) from a pinned commit of the suite. Submitted: run by someone else on their own machine "
    "and added by pull request after `attention-suite validate` passed; the row names the submitter and the "
    "machine, its runs' pages the software versions, the date added and the suite commit. A row holds one tier, "
    "one submission and one hardware class, so numbers from different machines are never averaged into one cell. "
    "The first screen and the figures read the verified rows alone."
)
HARDWARE_RULE = (
    "Throughput and memory compare only within one hardware class (one device model, tier and thread count): "
    "filter by hardware to compare rows; a number beside another machine's says nothing about the methods."
)
# Peak memory that is the run's own (the CUDA allocator's peak; on a CPU the resident set's growth
# above the built run). Records before it name the whole process's peak (process_peak_rss): the
# runtime's footprint, which hides a method's cost, so it is never put on a memory axis.
OWN_MEMORY = ("cuda_allocator", "rss_high_water_mark_above_built_run")
# A training run's speed and memory: shown as cost only where the run's board lets them stand (Run.timed).
TIMINGS = ("train_tokens_per_s", "median_step_time_s", "peak_memory_bytes", "wall_time_s")
UNTIMED = ("Its board's training runs shared the machine, and their peak memory spans the evaluations at longer "
           "lengths: their speed and memory are no cost figures. The cell's cost is its configuration's mode=cost "
           "record, measured on an idle host (the accuracy-against-cost figures, cells.csv).")


def format_lr(lr: float) -> str:
    """A learning rate as sweeps write it: 3e-3, 1.5e-4."""
    mantissa, exponent = f"{lr:.2e}".split("e")
    return f"{mantissa.rstrip('0').rstrip('.')}e{int(exponent)}"


@dataclass(frozen=True)
class Column:
    """A board point: a task at one length (and number of key-value pairs), on one model backbone."""

    task: str
    seq_len: int | None = None
    num_kv_pairs: int | None = None  # recall tasks only
    model: str | None = None  # absent in records older than named models
    family: str | None = field(default=None, compare=False)  # the record's task.family (recall, lra, ...)

    @property
    def recall(self) -> bool:
        return self.num_kv_pairs is not None

    @property
    def label(self) -> str:
        """e.g. 'mqar 64·4 pairs (hybrid)' or 'listops_short (small)'."""
        base = f"{self.task} {self.seq_len}·{self.num_kv_pairs} pairs" if self.recall else self.task
        return f"{base} ({self.model})" if self.model else base

    @property
    def slug(self) -> str:
        """The point in a file name: 'mqar_64x4_hybrid'."""
        parts = [self.task, f"{self.seq_len}x{self.num_kv_pairs}" if self.recall else str(self.seq_len or ""),
                 self.model or ""]
        return safe_name("_".join(p for p in parts if p))

    def sort_key(self) -> tuple:
        return self.task, self.seq_len or 0, self.num_kv_pairs or 0, self.model or ""


def column_of(run: Run) -> Column:
    model = run.model.config.model
    family = getattr(run.model.task, "family", None)
    return Column(run.task, run.model.task.seq_len, run.model.task.num_kv_pairs, model.name if model else None,
                  family if isinstance(family, str) else None)


def verdict(values: list[float], baseline: float | None, examples: int | None) -> str:
    """Accuracies (one per seed, on a test set of ``examples``) against a baseline: 'above' (the
    comparison test finds the mean above it, stats.clearly_ahead), 'baseline', 'untested' (n < 2)
    or 'no baseline'."""
    if baseline is None:
        return "no baseline"
    if len(values) < 2:
        return "untested"
    return "above" if stats.clearly_ahead(stats.accuracy_estimate(values, examples), stats.Estimate((baseline,))) \
        else "baseline"


def within_sampling_error(value: float, baseline: float, examples: int) -> bool:
    """Whether ``value`` lies within the baseline's own sampling error on ``examples`` test examples:
    where a model that learned nothing lands by chance (two-sided, at stats.LEVEL)."""
    return abs(value - baseline) <= stats.z_critical() * math.sqrt(stats.binomial_var(baseline, examples))


@dataclass
class Cell:
    """One configuration's runs in a row and column: at the chosen learning rate, one per seed."""

    runs: list[Run] = field(default_factory=list)
    lr: float | None = None  # the learning rate of the shown runs, when they share one
    sweep: list[Run] = field(default_factory=list)  # one run per rate tried at the first seed, if several
    others: list[Cell] = field(default_factory=list)  # other configurations that landed in this row and column
    total: int = 0  # runs of this configuration behind the cell: every rate and seed, a rerun once
    disputed: list[Run] = field(default_factory=list)  # its submitted runs that disagree with a verified record

    def values(self, metric: str = ACCURACY.name) -> list[float]:
        """``metric`` of the runs that finished ok and hold a number for it (one per seed); a timing
        (TIMINGS) only of runs whose timings stand as cost (Run.timed)."""
        values = (r.metric(metric) for r in self.runs if r.status == "ok" and (r.timed or metric not in TIMINGS))
        return [v for v in values if v is not None]

    def mean(self, metric: str = ACCURACY.name) -> float | None:
        values = self.values(metric)
        return statistics.fmean(values) if values else None

    def median(self, metric: str) -> float | None:
        values = self.values(metric)
        return statistics.median(values) if values else None

    def spread(self, metric: str = ACCURACY.name) -> float | None:
        """Sample standard deviation over seeds; None with fewer than two."""
        values = self.values(metric)
        return statistics.stdev(values) if len(values) >= 2 else None

    def test_size(self) -> int | None:
        """The examples of the test split its ok runs were scored on (budget.num_test), when they agree."""
        budgets = [r.model.config.budget for r in self.runs if r.status == "ok"]
        sizes = {b.num_test if b else None for b in budgets}
        size = sizes.pop() if len(sizes) == 1 else None
        return size or None

    def estimate(self) -> stats.Estimate:
        """The accuracy as the comparison test reads it: seeds and the test set's sampling error."""
        return stats.accuracy_estimate(self.values(), self.test_size())

    def baseline(self) -> float | None:
        """The accuracy the cell is read against: the mean of its runs' board baselines."""
        values = [b.accuracy for b in map(board_baseline, self.runs) if b is not None]
        return statistics.fmean(values) if values else None

    def verdict(self) -> str:
        """'above' (clearly above the baseline), 'baseline', 'untested' (n < 2) or 'no baseline'."""
        return verdict(self.values(), self.baseline(), self.test_size())

    def did_not_learn(self) -> bool:
        """DID_NOT_LEARN: every seed's accuracy lies within the baseline's sampling error on the test
        set (two or more seeds, a baseline and a test size needed): nothing to rank."""
        values, baseline, size = self.values(), self.baseline(), self.test_size()
        return (len(values) >= 2 and baseline is not None and size is not None
                and all(within_sampling_error(v, baseline, size) for v in values))

    def solved(self) -> bool:
        """SOLVED: every seed stopped at its budget's target (metrics.stopped_early) with a best
        validation accuracy at or above it. Solved cells are tied on accuracy: what is left to
        compare is how many steps they took to reach the target."""
        runs = [r for r in self.runs if r.status == "ok"]
        return bool(runs) and all(reached_target(r) for r in runs)

    def length_points(self) -> dict[int, list[dict]]:
        """Per longer test length its ok runs were scored at (metrics.length_accuracy), one point per
        run: {seq_len, num_kv_pairs, accuracy, baseline_accuracy}."""
        found: dict[int, list[dict]] = {}
        for run in (r for r in self.runs if r.status == "ok"):
            for point in run.record["metrics"].get("length_accuracy") or []:
                found.setdefault(point["seq_len"], []).append(point)
        return dict(sorted(found.items()))

    def steps_estimate(self) -> stats.Estimate:
        """Steps to the target over seeds, as the comparison test reads them: the step of the
        evaluation that first met the target is known to within the evaluation interval (the target
        was crossed somewhere in it: a uniform variance of interval² / 12 per seed)."""
        runs = [r for r in self.runs if r.status == "ok"]
        intervals = [number((r.record["config"].get("budget") or {}).get("eval_every")) or 0.0 for r in runs]
        known = sum(i * i / 12 for i in intervals) / len(runs) ** 2 if runs else 0.0
        return stats.Estimate(tuple(float(r.metric("steps")) for r in runs), known)

    def state_not_applicable(self) -> bool:
        """Whether the cell's method has no recurrent form (``Run.stateless``): no state size to show."""
        return bool(self.runs) and all(r.stateless for r in self.runs)

    def failures(self) -> Counter:
        """How many runs ended in each status other than ok (diverged, oom, error, ...)."""
        return Counter(r.status for r in self.runs if r.status != "ok")

    def every_run(self) -> list[Run]:
        """The runs behind what the cell shows: its seeds' and its learning-rate sweep's, each once."""
        return list({id(r): r for r in (*self.sweep, *self.runs)}.values())

    def commits(self) -> dict[str, list[Run]]:
        """The cell's runs by the commit they ran at (env.git_commit; 'not recorded' when absent)."""
        found: dict[str, list[Run]] = {}
        for run in self.every_run():
            found.setdefault(run.model.env.git_commit or "not recorded", []).append(run)
        return found

    def dirty(self) -> list[Run]:
        """The cell's runs made on a checkout with uncommitted changes."""
        return [r for r in self.every_run() if r.model.env.git_dirty]

    def curve_mark(self) -> str | None:
        """What the seeds' validation curves say when the budget ended them (PLATEAU_RULE): 'on the
        plateau at step N', 'still rising at step N (seeds ...)', or None."""
        runs = [r for r in self.runs if r.status == "ok"]
        shapes = [curve_shape(r) for r in runs]
        if not runs or None in shapes:
            return None
        step = max(r.metric("steps") for r in runs)
        if all(shape == "flat" for shape in shapes):
            return f"on the plateau at step {step:,}"
        rising = [str(r.seed) for r, shape in zip(runs, shapes) if shape == "rising"]
        if rising:
            return f"still rising at step {step:,} (seed{'s' if len(rising) > 1 else ''} {', '.join(rising)})"
        return None

    def best_steps(self) -> list[tuple[Any, int]]:
        """(seed, metrics.best_step) of each averaged run that recorded it: the steps to its best
        validation accuracy."""
        return [(r.seed, r.metric("best_step")) for r in self.runs
                if r.status == "ok" and r.metric("best_step") is not None]

    def untimed(self) -> bool:
        """Whether its runs' speed and memory are no cost figures (Run.timed): its cost is its --cost record's."""
        return any(r.status == "ok" and not r.timed for r in self.runs)

    def memory(self, own: bool = True) -> tuple[float | None, str | None]:
        """Median peak memory of the averaged runs and what it measured: the run's own memory
        (OWN_MEMORY) when any run recorded it; with ``own`` false, else the older figures (the
        whole process's peak), so that a table can show them, marked."""
        by_source: dict[str | None, list[float]] = {}
        for run in (r for r in self.runs if r.status == "ok" and r.timed and r.metric("peak_memory_bytes") is not None):
            by_source.setdefault(run.metric("peak_memory_source"), []).append(run.metric("peak_memory_bytes"))
        for source in OWN_MEMORY + (() if own else tuple(sorted(by_source, key=str))):
            if by_source.get(source):
                return statistics.median(by_source[source]), source
        return None, None


def reached_target(run: Run) -> bool:
    """Whether the run stopped early at its budget's target: stopped_early, and its best validation
    accuracy and step count recorded with the accuracy at or above the target."""
    budget = run.model.config.budget
    target = budget.target_val_accuracy if budget else None
    best = run.metric("val_accuracy")
    return (stopped_early(run) is True and target is not None and best is not None and best >= target
            and run.metric("steps") is not None)


def ran_budget(run: Run) -> bool:
    """Whether the run took every step its budget allows, without stopping at its target."""
    budget, taken = run.model.config.budget, run.metric("steps")
    limit = budget.max_steps if budget else None
    return limit is not None and taken is not None and taken >= limit and not stopped_early(run)


def curve_shape(run: Run) -> str | None:
    """A run's validation curve once its budget ended it (PLATEAU_RULE): 'flat' (never clearly
    above its baseline), 'rising' (its best in the last tenth of its steps), 'learned', or None (no
    curve or baseline, or the run did not run its budget)."""
    curve, baseline = run.metric("val_curve"), board_baseline(run)
    if not curve or baseline is None or not ran_budget(run):
        return None
    budget = run.model.config.budget
    examples = budget.num_val if budget and budget.num_val else None
    b = baseline.accuracy
    noise = 2 * math.sqrt(b * (1 - b) / examples) if examples else 0.0
    steps, accuracies = [s for s, _ in curve], [a for _, a in curve]
    best = max(accuracies)
    if best <= b + noise:
        return "flat"
    best_step = steps[accuracies.index(best)]
    return "rising" if best_step >= (1 - RISING_TAIL) * steps[-1] else "learned"


def stopped_early(run: Run) -> bool | None:
    """Whether the run stopped at its target accuracy (metrics.stopped_early; None if not recorded)."""
    value = getattr(run.model.metrics, "stopped_early", None)
    return value if isinstance(value, bool) else None


def latest(runs: list[Run], key) -> list[Run]:
    """The latest run (by ``created``) of each value of ``key``, in first-seen order."""
    found: dict = {}
    for run in runs:
        k = key(run)
        if k not in found or run.created > found[k].created:
            found[k] = run
    return list(found.values())


def seed_order(seed) -> tuple:
    return number(seed) is None, number(seed) or 0.0, str(seed)


def one_per_seed(runs: list[Run]) -> list[Run]:
    """The latest run of each seed, by seed."""
    return sorted(latest(runs, lambda r: r.seed), key=lambda r: seed_order(r.seed))


# What two ok records of one run (one config hash: its seed included) must agree on: a rerun of one
# config computes the same numbers (on a CPU bit for bit); only times and memory vary.
AGREED = ("test_accuracy", "val_accuracy")


def said(run: Run) -> tuple:
    return tuple(run.metric(m) for m in AGREED)


def conflicts(runs: list[Run]) -> dict[tuple, list[Run]]:
    """Per run shown in one row (its config hash, tier, origin and hardware: a row's runs share the
    last three), its ok board records when they disagree on what ``AGREED`` names: one of them is
    wrong and nothing says which, so the board shows neither (the latest is no better: ``created``
    is whatever a record says)."""
    ok: dict[tuple, list[Run]] = {}
    for run in runs:
        if on_board(run) and run.status == "ok":
            ok.setdefault((run.config_hash, run.tier, run.origin, run.hardware), []).append(run)
    return {key: found for key, found in ok.items() if len(set(map(said, found))) > 1}


def disputed(runs: list[Run]) -> dict[int, list[Run]]:
    """Per submitted run (by ``id``) that disagrees with the verified records of its run (one config
    hash), when those agree: those verified records. It is shown in its submitted row only, marked."""
    verified: dict[str, list[Run]] = {}
    for run in runs:
        if on_board(run) and run.status == "ok" and run.tier == "verified":
            verified.setdefault(run.config_hash, []).append(run)
    return {id(run): verified[run.config_hash] for run in runs
            if on_board(run) and run.status == "ok" and run.tier != "verified" and run.config_hash in verified
            and len(set(map(said, verified[run.config_hash]))) == 1 and said(run) != said(verified[run.config_hash][0])}


def conflict_messages(runs: list[Run]) -> list[str]:
    """One line per conflict, naming its records, what each says, and what the board shows."""
    def told(run: Run) -> str:
        return f"{run.source.as_posix()}: " + ", ".join(f"{m}={run.metric(m)}" for m in AGREED)

    lines = []
    for (config_hash, tier, origin, hardware), found in conflicts(runs).items():
        row = f"the {tier} row{f' of {origin}' if origin else ''} on {hardware}"
        lines.append(f"conflict: {len(found)} records of one run (config hash {config_hash}, seed {found[0].seed}) "
                     f"disagree, so {row} shows none of them: {'; '.join(map(told, found))}")
    by_id = {id(run): run for run in runs}
    for key, verified in disputed(runs).items():
        run = by_id[key]
        lines.append(f"conflict: the submitted record {told(run)} disagrees with the verified record(s) of its run "
                     f"(config hash {run.config_hash}, seed {run.seed}) {'; '.join(map(told, verified))}; the verified "
                     f"row shows the verified one, the submitted row of {run.origin} shows it marked 'disputed'")
    return lines


def off_protocol(run: Run) -> bool:
    """Whether a run's seed is not one its board's protocol runs (a forged fourth seed, say)."""
    seeds = boards.protocol_seeds().get(run.budget)
    return seeds is not None and run.seed not in seeds


def off_protocol_messages(runs: list[Run]) -> list[str]:
    """One line per board run left out of its cell for its seed."""
    return [f"{run.source.as_posix()}: seed {run.seed!r} is not one of the seeds of the {run.budget} board's protocol "
            f"({', '.join(map(str, boards.protocol_seeds()[run.budget]))}); left out of its cell"
            for run in runs if on_board(run) and off_protocol(run)]


def config_cell(runs: list[Run]) -> Cell:
    """The cell of one configuration (one cell_key): the chosen learning rate's runs, one per seed
    of its board's protocol; a run whose records conflict is left out."""
    runs = [r for r in runs if not off_protocol(r)]
    clashing = {config_hash for config_hash, *_ in conflicts(runs)}  # one row: one tier, origin and hardware
    runs = latest([r for r in runs if r.config_hash not in clashing], lambda r: r.config_hash)
    if not runs:
        return Cell()
    rates = {r.lr for r in runs}
    if len(rates) == 1:
        return Cell(one_per_seed(runs), lr=rates.pop(), total=len(runs))
    # The protocol tries every rate at the first seed and runs the other seeds at the chosen one.
    first = min((r.seed for r in runs), key=seed_order)
    sweep = sorted((r for r in runs if r.seed == first and r.lr is not None), key=lambda r: r.lr)
    chosen = select_lr([r.record for r in sweep]) if sweep else None
    if chosen is None:  # no rate finished ok: the cell shows the failed sweep
        return Cell(sweep or runs, sweep=sweep, total=len(runs))
    return Cell(one_per_seed([r for r in runs if r.lr == chosen]), lr=chosen, sweep=sweep, total=len(runs))


def config_key(run: Run) -> str:
    """The run's cell_key: what defines its configuration, the learning rate and seed aside."""
    return cell_key(run.record["config"])


def make_cell(runs: list[Run]) -> Cell:
    """The runs of one row and column as a cell: of several configurations, the one with most runs."""
    configs: dict[str, list[Run]] = {}
    for run in runs:
        configs.setdefault(config_key(run), []).append(run)
    cells = [config_cell(group) for group in configs.values()]
    cells.sort(key=lambda c: (c.total, max((r.created for r in c.runs), default="")), reverse=True)
    cells[0].others = cells[1:]
    return cells[0]


@dataclass
class Row:
    """One configuration of a method; its cells by column. ``variant`` names what sets the row apart
    from the method's usual configuration on the same model (e.g. ``d_model=32``); empty for that one."""

    method: str
    budget: str
    device: str
    dtype: str
    variant: str = ""
    cells: dict[Column, Cell] = field(default_factory=dict)
    tier: str = "verified"  # runs.TIERS: a row holds one tier's runs, one submission's, one hardware class's
    origin: str | None = None  # a submitted row's submission folder
    hardware: str = ""  # the device model its runs were measured on (Run.hardware)
    recipe: str = SUITE_RECIPE  # the training recipe of its runs (Run.recipe): a row never mixes recipes

    @property
    def key(self) -> str:
        where = (self.tier, self.origin, self.hardware) if self.tier != "verified" else ()
        trained = (f"recipe={self.recipe}",) if self.recipe != SUITE_RECIPE else ()
        return " | ".join(filter(None, (self.method, self.variant, *trained, self.budget, self.device, self.dtype,
                                        *where)))

    @property
    def example(self) -> Run:
        """A run of the row, for its tier, submitter, date, commit and machine (which its runs share)."""
        return next(iter(self.cells.values())).every_run()[0]

    @property
    def label(self) -> str:
        """The method, with its variant and a recipe other than the suite's when it has them: 'linear',
        'linear (d_model=32)', 'linear (d_model=32, recipe=zoology)'."""
        parts = [p for p in (self.variant, f"recipe={self.recipe}" if self.recipe != SUITE_RECIPE else "") if p]
        return f"{self.method} ({', '.join(parts)})" if parts else self.method

    def task_cells(self, task: str) -> list[Cell]:
        """The row's cells on ``task``, at whatever length and model."""
        return [cell for column, cell in self.cells.items() if column.task == task]

    def lra_average(self) -> float | None:
        """LRA's average of this row, or None unless each of the five LRA tasks has one cell with a mean."""
        means = []
        for task in LRA_TASKS:
            cells = self.task_cells(task)
            if len(cells) != 1 or cells[0].mean() is None:
                return None
            means.append(cells[0].mean())
        return statistics.fmean(means)


def on_board(run: Run) -> bool:
    return run.kind == "train" and run.budget not in TEST_BUDGETS


def smoke_run(run: Run) -> bool:
    """A train run at a test budget: off the tables, listed in the board's smoke section."""
    return run.kind == "train" and run.budget in TEST_BUDGETS


# The sizes that set a method's configuration apart within one model (its width, heads, depth, and
# every method option): a run that differs from the method's usual value of one of them on that
# model (the most common one among its runs) is a variant and gets a row of its own.
VARIANT_SIZES = ("d_model", "num_heads", "num_layers", "d_ff")


def _sizes(run: Run) -> dict[str, Any]:
    config = run.model.config
    options = (config.method.options if config.method else None) or {}
    return {**{k: getattr(config.model, k, None) for k in VARIANT_SIZES}, **options}


def variants(runs: list[Run]) -> dict[int, str]:
    """Per run (by ``id``): its variant label among ``runs`` of one method, budget, device and dtype;
    sizes are compared among runs on the same model."""
    by_model: dict[str | None, list[Run]] = {}
    for run in runs:
        by_model.setdefault(column_of(run).model, []).append(run)
    labels = {}
    axes = boards.smaller_states().get(runs[0].method, {}) if runs else {}
    for group in by_model.values():
        sizes = [_sizes(r) for r in group]
        usual = {}
        for key in {k for s in sizes for k in s}:
            # The usual value is the most common one outside the boards' smaller states of the method
            # (a state axis may hold more runs than the default state while a board is partial).
            counts = Counter(repr(s.get(key)) for s in sizes)
            outside = Counter({v: n for v, n in counts.items() if v not in axes.get(key, ())}) or counts
            usual[key] = outside.most_common(1)[0][0]
        for run, own in zip(group, sizes):
            labels[id(run)] = ", ".join(f"{k}={own.get(k)}" for k in sorted(usual)
                                        if repr(own.get(k)) != usual[k])
    return labels


def by_host(rows: list[Row]) -> list[tuple[str, list[Row]]]:
    """The rows per host (Row.hardware: the device model and thread count), by name: a speed or
    memory figure or table reads one host's rows, so no number sits beside another machine's."""
    hosts: dict[str, list[Row]] = {}
    for row in rows:
        hosts.setdefault(row.hardware, []).append(row)
    return sorted(hosts.items())


def board_rows(runs: list[Run]) -> list[Row]:
    """Train runs (test budgets left out) grouped into rows, sorted by method, tier, variant, budget,
    device, dtype. Runs of different tiers, submissions or hardware classes never share a row, so
    they are never averaged into one cell."""
    by_method: dict[tuple, list[Run]] = {}
    for run in filter(on_board, runs):
        by_method.setdefault((run.method, run.budget, run.device, run.dtype, run.tier, run.origin), []).append(run)
    grouped: dict[tuple, dict[Column, list[Run]]] = {}
    for (method, budget, device, dtype, *where), group in by_method.items():
        labels = variants(group)
        for run in group:  # the variant is named among every host's and recipe's runs, so their rows match
            key = (method, labels[id(run)], budget, device, dtype, *where, run.hardware, run.recipe)
            grouped.setdefault(key, {}).setdefault(column_of(run), []).append(run)
    rows = []
    against = disputed(runs)
    for key in sorted(grouped, key=row_order):
        method, variant, budget, device, dtype, tier, origin, hardware, recipe = key
        cells = {c: make_cell(found) for c, found in grouped[key].items()}
        for cell in cells.values():
            cell.disputed = [r for r in cell.runs if id(r) in against]
        rows.append(Row(method, budget, device, dtype, variant, cells, tier, origin, hardware, recipe))
    return rows


def row_order(key: tuple) -> tuple:
    """Rows by method (methods.CANONICAL_ORDER, then by name), the verified row before submitted
    ones, budget, device, dtype; a method's usual configuration before its variants, variants with
    their numbers compared as numbers (window=8 before window=16); the suite's recipe first."""
    method, variant, budget, device, dtype, tier, origin, hardware, recipe = key
    natural = [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", variant)]
    return (known.method_rank(method), tier != "verified", origin or "", hardware, budget, device, dtype,
            variant != "", natural, recipe != SUITE_RECIPE, recipe)


def board_columns(rows: list[Row]) -> list[Column]:
    """The board's columns: LRA's five tasks when any LRA task ran (so the average's inputs show),
    Path-X if it ran, then every other board point, by task, length, pairs and model."""
    present = sorted({c for row in rows for c in row.cells}, key=Column.sort_key)
    lra: list[Column] = []
    if any(c.task in reference.TASKS for c in present):
        for task in reference.TASKS:
            ran = [c for c in present if c.task == task]
            lra += ran or ([Column(task)] if task in LRA_TASKS else [])
    return lra + [c for c in present if c not in lra]


@dataclass(frozen=True)
class Family:
    """A family of tasks as the project's board files declare it (suite/boards/*.yaml, ``families``):
    one table of the board, and (``figures``: recall) the board's recall figures, naming its points
    by ``label``."""

    name: str
    tasks: tuple[str, ...]
    title: str
    label: str
    figures: str | None


FAMILIES = tuple(Family(name, tuple(f["tasks"]), f.get("title", name), f.get("label", f.get("title", name)),
                        f.get("figures")) for name, f in boards.families().items())
RECALL_FAMILIES = tuple(f for f in FAMILIES if f.figures == "recall")
MAX_COLUMNS = 6  # board points per table: more would not fit a 1,400-pixel window


@dataclass(frozen=True)
class Table:
    """One table of the board: the points of a task family (a run of them, when a family has more
    than MAX_COLUMNS) and the rows with a cell among them."""

    family: str
    columns: list[Column]
    rows: list[Row]

    @property
    def title(self) -> str:
        return next((f.title for f in FAMILIES if f.name == self.family), self.family)

    @property
    def lra(self) -> bool:
        """Whether it holds LRA's tasks (and so their average)."""
        return any(c.task in LRA_TASKS for c in self.columns)

    @property
    def slug(self) -> str:
        return safe_name(f"table-{self.family}-{self.columns[0].slug}")


def family_of(column: Column) -> str:
    """The family a board file puts the point's task in; else the record's own (task.family), except
    LRA's: a task of LRA's kind that is not LRA's own (ListOps short: LRA's generator, shorter
    sequences) is its own family, so it never reads as an LRA number."""
    declared = next((f.name for f in FAMILIES if column.task in f.tasks), None)
    if declared:
        return declared
    return column.family if column.family and column.family != "lra" else column.task


def board_tables(rows: list[Row], columns: list[Column]) -> list[Table]:
    """The board split into one table per task family, the family with the most cells first;
    a family of more than MAX_COLUMNS points (LRA's tasks aside, which its average reads together)
    is split into tables of MAX_COLUMNS."""
    families: dict[str, list[Column]] = {}
    for column in columns:
        families.setdefault(family_of(column), []).append(column)
    tables = []
    for family, found in families.items():
        size = len(found) if family == "lra" else MAX_COLUMNS
        for start in range(0, len(found), size):
            chunk = found[start:start + size]
            tables.append(Table(family, chunk, [r for r in rows if any(c in r.cells for c in chunk)]))
    cells: Counter = Counter()
    for t in tables:
        cells[t.family] += sum(c in r.cells for r in t.rows for c in t.columns)
    return sorted(tables, key=lambda t: -cells[t.family])  # stable: a family's tables stay in order


@dataclass(frozen=True)
class Baseline:
    """What a column's accuracy is compared against: e.g. chance, or the majority class."""

    accuracy: float
    name: str


IN_CONTEXT_GUESS = "a value from the context at random: 1 / key-value pairs"


def board_baseline(run: Run) -> Baseline | None:
    """The baseline a run is read against on the board: the one its record names, except on recall,
    where it is at least 1 / key-value pairs. A model that copies any value of the context scores
    that without binding a single key to its value (records before this rule name chance, 1 / values)."""
    recorded = run.metric("baseline_accuracy")
    name = run.metric("baseline_name") or "baseline"
    pairs = run.model.task.num_kv_pairs
    if pairs and pairs >= 1 and (recorded is None or 1.0 / pairs > recorded):
        return Baseline(1.0 / pairs, IN_CONTEXT_GUESS)
    return None if recorded is None else Baseline(recorded, name)


def column_baselines(rows: list[Row]) -> dict[Column, Baseline]:
    """Per column: the mean of its runs' board baselines, and the baseline's most common name."""
    found: dict[Column, list[Baseline]] = {}
    for row in rows:
        for column, cell in row.cells.items():
            found.setdefault(column, []).extend(b for b in map(board_baseline, cell.runs) if b is not None)
    return {column: Baseline(statistics.fmean(b.accuracy for b in bs), Counter(b.name for b in bs).most_common(1)[0][0])
            for column, bs in found.items() if bs}


@dataclass(frozen=True)
class ReferenceRow:
    """A published LRA row: accuracy in percent per task (None: failed), its average."""

    model: str
    ours: str | None  # our method reimplementing that model, if any
    accuracy: dict[str, float | None]
    average: float


def reference_rows() -> list[ReferenceRow]:
    """LRA Table 1 (Tay et al. 2021), one row per published model."""
    ours = {model: method for method, model in reference.METHOD_MODELS.items()}
    models = dict.fromkeys(r.model for r in reference.RESULTS)
    return [
        ReferenceRow(model, ours.get(model),
                     {t: reference.accuracy(model, t) for t in reference.TASKS}, reference.average(model))
        for model in models
    ]
