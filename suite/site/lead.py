"""What the board's first screen states, derived from the records by the rules in RULES (the
comparisons themselves live in suite/site/rules.py): a paragraph of what the board ran and found, the
recall figures, one line per board point naming its best cells and its best sub-quadratic cells at
no more state (or the cells tied for it), the equal-state and equal-width comparisons of the
state-bound point, and where each method's kernel overtakes exact attention. Each sentence carries
its rule's name, so a reader (and tests/test_site_rules.py) can tell which rule made it."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from suite import board as boards
from suite import recipe as recipes
from suite.metrics import format_bytes
from suite.modes import declared
from suite.site import known, stats
from suite.site.board import LRA_TASKS, SUITE_RECIPE, VARIANT_SIZES, Cell, Column, Row, board_tables
from suite.site.costs import COST_RULE, INFERENCE, CellCost, cell_costs
from suite.site.figures import (
    AtLength,
    FidelityHeadline,
    Figure,
    accuracy_text,
    at_lengths,
    by_device_and_budget,
    compact_count,
    crossovers,
    fidelity_headline,
    recall_figures,
    recall_points,
    reference_names,
    state_figures,
    sweep_groups,
    sweep_points,
)
from suite.site.rules import (
    STATE_BAND,
    WIDTH,
    Knobs,
    equal_state_groups,
    exact_at,
    fastest,
    leaders,
    optimisation_failed,
    relation,
    same_result,
)
from suite.site.runs import Run

ASSUMED_TIME = (
    "Some of these records predate method.time_in_length: among them, the methods package's reference "
    "method is taken as exact attention and every other as sub-quadratic."
)
KERNEL_TIMES = ("fwdbwd_median_s", "fwd_median_s")  # the kernel times whose crossovers the first screen states

# Every sentence of the first screen comes from one of these rules (suite/site/rules.py holds the
# comparisons); the page tags each sentence with its rule's name, and states each rule below it.
RULES = {
    "SCALE": "What the board ran, from its train records: the methods, the tasks, the models' parameter counts "
             "(metrics.param_count), the sequence lengths (task.seq_len, or min_length-max_length), the most steps "
             "a run may take (budget.max_steps) and the CPU threads per run (config.cpu_threads).",
    "PAPER_SCALE": "The board's scale against the papers': CPU-scale runs rank methods at their own sizes; the "
                   "published rows are reported results at the papers' scale, not rerun here.",
    "AT_LENGTH": (
        "Per recall point with cost records (COST), at the longest length where exact attention's accuracy and cost "
        "were both measured (a length it was tested at, evaluation only, or the trained one): exact attention's mean "
        "accuracy there, and for each other method at its default state its mean accuracy, whether the comparison "
        "test (TEST) places it clearly below exact attention's (what the method gives up), and its inference time "
        "per sequence and peak memory relative to exact attention's on the same host at the same commit (what it "
        "saves)."),
    "COST": COST_RULE,
    "LENGTH_GAP": "The longest sequence any train record learned on, against the lengths at which the kernel records "
                  "place each method's crossover with exact attention (suite.scaling): where every crossover lies "
                  "beyond it, accuracy and speed were not measured at the same length.",
    "TEST": (
        "One comparison test behind every verdict (suite/site/stats.py): the difference of two cells' mean accuracies "
        "(or of a cell's and its baseline) over its standard error, where the variance of each mean is its seeds' "
        "s² / n plus the test set's binomial sampling error p(1 − p) / N (N: the test examples, budget.num_test; "
        "every seed is scored on the same examples, so seeds do not average it away; on MQAR an example holds "
        "several queries, so this overstates the error). The degrees of freedom are Welch-Satterthwaite's over the "
        "seed terms (the binomial term is known, so adds none). A difference is stated when Student's t rejects "
        f"equality two-sided at level {stats.LEVEL}; otherwise the cells are tied."),
    "TIES": (
        "Per point, over the cells with at least two seeds (one seed gives no spread) that learned (DID_NOT_LEARN): "
        "the best is the cell with the highest mean, tied with every cell down to the last one the comparison test "
        "(TEST) cannot place behind it, so a cell above a tied one is tied too and never behind. Solved cells are "
        "among the best (SOLVED). The best sub-quadratic is asked the same way among the cells that are not exact "
        "attention at that point and hold no more state than the best (within the equal-state band; where exact "
        "attention is among the best, than its cells), so no method wins by holding more state."),
    "SOLVED": (
        "A cell is solved when every seed stopped early at its budget's validation target (metrics.stopped_early, "
        "with its best validation accuracy at or above budget.target_val_accuracy). Solved cells are tied on "
        "accuracy: the gaps between them measure how far each run overshot the target at its last evaluation. They "
        "are compared only by the steps each seed took to reach the target (metrics.steps; mean ± sd), by the same "
        "test, each seed's step known to within its evaluation interval (budget.eval_every: a uniform error, "
        "variance interval² / 12)."),
    "DID_NOT_LEARN": (
        "A cell did not learn when every seed's test accuracy lies within the baseline's own sampling error on the "
        "test set (|accuracy − baseline| ≤ z·√(b(1 − b) / N), z the two-sided normal quantile at level "
        f"{stats.LEVEL}). Such a cell is listed apart, labelled, and never ranked."),
    "OPTIMISATION_FAILED": (
        "On recall, a cell says its optimisation failed (not its capacity) when every seed's final train loss "
        "(metrics.final_train_loss) lies above ln(pairs), what spreading a guess evenly over the context's values "
        "scores with no binding learnt, or when it did not learn (DID_NOT_LEARN) at some pairs while the same "
        "configuration learned at more pairs on the same model and length: capacity only falls with more pairs."),
    "EXACT_AT_POINT": "A cell is exact attention at its point when its record's method.time_in_length is N^2, or "
                      "when its window (the method's resolved window option) is at least the point's sequence "
                      "length: such a window sees every key.",
    "SAME_RESULT": "Two cells whose runs measured the same test accuracy, steps and final loss at every seed are one "
                   "result: it is shown once, under the exact method where one is exact attention, with the other "
                   "named beside it.",
    "EQUAL_STATE": (
        "At the state-bound point (the recall point where the methods ran at the most state sizes), cells hold "
        "equal state when their recurrent states lie within 10% of the band's smallest (metrics.state_bytes, median "
        "of the cell's runs); each band is ranked by the ties rule. A sentence compares two cells only inside one "
        "band: its best sub-quadratic cell with its best exact one (the fastest solved, else the highest mean), by "
        "the comparison test (TEST; two solved cells tie), each named with the knob that set its state (the "
        "method's state axis on the board: model width, feature count, window). A band with no exact-attention "
        "cell is named as such and compared with nothing."),
    "RECIPE": (
        "The board ranks cells under the suite's training recipe; where the state-bound point was also run under "
        "another recipe (recipe=zoology: DESIGN.md, \"The recipe\"), each equal-state comparison (EQUAL_STATE) is "
        "asked again of the same two configurations' cells under it, by the same test. The comparison holds when "
        "the test gives the same answer (leads, ties, trails) under every recipe that ran both; the first screen "
        "states a comparison that holds, or that no other recipe ran (saying so), and of the others says that the "
        "ordering depends on the recipe, naming the switch whose one-switch runs move the two cells' gap the most "
        "(or that no run on the board sets one switch alone)."),
    "EQUAL_WIDTH": "At the state-bound point, the methods at one model width (d_model) with their other options as "
                   "usual, ranked by the ties rule: the comparison where the knob is the same for every method.",
    "KERNEL_CROSSOVER": "Per kernel record group: the length from which each method is faster than the faster of "
                        "exact attention's implementations for good (suite.scaling.crossover, log-log).",
    "FIDELITY": (
        "Fidelity ranks maps per input source, so per score scale (synthetic scores of a set std, or queries and "
        "keys captured from a trained softmax model, with that model's test accuracy and the scores' measured std "
        "beside them), by the errors that mean the same for every map: the output's relative error, then the "
        "attention rows' total variation (means over queries). A captured source whose model is not above its "
        "baseline by the board's margin (the baseline's sampling error on its test set, DID_NOT_LEARN's) is shown "
        "and not ranked: its attention is near uniform. The denominator error is shown first only where the map's "
        "normaliser estimates softmax's (the method declares denominator_estimates_softmax)."),
    "CITATION": "How to cite the suite and where its source lives: the repository's CITATION.cff (title, version, "
                "date, authors) and the repository's address, set once in pyproject.toml ([project.urls] Repository, "
                "which CITATION.cff's repository-code repeats) or, built in a GitHub workflow, the workflow's "
                "repository; every page links it.",
}
RULE_NOTE = ("Spread: ± one standard deviation over seeds, n seeds. A cell that is not clearly above its baseline "
             "(TEST) says so.")


@dataclass(frozen=True)
class Sentence:
    """A sentence of the first screen and the rule (a key of RULES) that produced it."""

    rule: str
    text: str


@dataclass(frozen=True)
class Entry:
    """A cell as the first screen names it."""

    row: Row
    cell: Cell
    state: float | None  # median recurrent state bytes of its runs
    exact: bool  # exact attention at its point (rules.exact_at), else sub-quadratic
    assumed: bool  # no run recorded method.time_in_length: ``exact`` follows known.is_exact's fallback
    same: tuple[str, ...] = ()  # rows whose cells are the same result (rules.same_result), shown here once
    failed: str | None = None  # why its optimisation failed (rules.optimisation_failed), if it did

    @property
    def knobs(self) -> Knobs:
        return Knobs.of(self.row)

    @property
    def state_knob(self) -> str:
        """The knob that set the cell's state, at the cell's value ('d_model=32', 'window=16'): its
        method's state axis on the boards (suite/boards/*.yaml state_axes), else the model's width."""
        key = next(iter(boards.smaller_states().get(self.row.method, {})), WIDTH)
        values = {state_value(r, key) for r in self.cell.runs}
        value = values.pop() if len(values) == 1 else None
        return f"usual {key}" if value is None else f"{key}={value}"  # None: not recorded (records before resolved)

    @property
    def named(self) -> str:
        """The cell as an equal-state sentence names it: its method with the knob that set its state
        (and the rest of its variant): 'linear (d_model=64)'."""
        parts = dict.fromkeys([self.state_knob, *filter(None, self.row.variant.split(", "))])
        return f"{self.row.method} ({', '.join(parts)})"

    @property
    def width(self) -> int | None:
        widths = {r.model.config.model.d_model for r in self.cell.runs if r.model.config.model}
        return widths.pop() if len(widths) == 1 else None


@dataclass(frozen=True)
class Ranking:
    """Cells ranked by the ties rule: the leaders (one: the best; several: tied), then the rest; the
    solved leaders by steps to the target, the fewest first (SOLVED); the cells that did not learn
    apart, unranked (DID_NOT_LEARN)."""

    leaders: list[Entry]
    behind: list[Entry]
    solved: list[Entry] = field(default_factory=list)  # solved leaders, fewest steps to the target first
    fastest: list[Entry] = field(default_factory=list)  # the solved leaders tied for the fewest steps
    unlearned: list[Entry] = field(default_factory=list)

    @classmethod
    def of(cls, entries: list[Entry]) -> Ranking:
        learned = [e for e in entries if not e.cell.did_not_learn()]
        top = {id(c) for c in leaders([e.cell for e in learned])}
        quick = {id(c) for c in fastest([e.cell for e in learned if id(e.cell) in top])}
        ordered = sorted(learned, key=lambda e: -e.cell.mean())
        solved = sorted((e for e in ordered if id(e.cell) in top and e.cell.solved()),
                        key=lambda e: e.cell.steps_estimate().mean)
        return cls([e for e in ordered if id(e.cell) in top], [e for e in ordered if id(e.cell) not in top],
                   solved, [e for e in solved if id(e.cell) in quick],
                   sorted((e for e in entries if e.cell.did_not_learn()), key=lambda e: -e.cell.mean()))

    @property
    def slower(self) -> list[Entry]:
        """Solved leaders the test places behind the fastest on steps."""
        return [e for e in self.solved if e not in self.fastest]

    @property
    def unsolved(self) -> list[Entry]:
        """Leaders tied on accuracy with the solved ones without being solved themselves."""
        return [e for e in self.leaders if e not in self.solved]


@dataclass(frozen=True)
class PointLine:
    column: Column
    where: str  # budget and device, when the board has several
    best: Ranking
    best_sub: Ranking  # sub-quadratic cells with no more state than the best (within the band)


@dataclass(frozen=True)
class Comparison:
    """An equal-state band's comparison under one recipe: its best sub-quadratic cell against its
    best exact one (EQUAL_STATE), or under another recipe the same two configurations' cells
    (RECIPE); ``relation`` is None where that recipe did not run both."""

    recipe: str
    sub: Entry | None
    exact: Entry | None
    relation: str | None


@dataclass(frozen=True)
class StateGroup:
    """Cells of equal state (rules.equal_state_groups) at the state-bound point, ranked; its
    comparison under the suite's recipe and under each other recipe the point ran (RECIPE)."""

    low: float
    high: float
    ranking: Ranking
    knobs: list[str]  # what sets the cells' states apart, e.g. ["d_model", "window"]
    compared: Comparison | None = None  # None: the band holds no exact cell, or no sub-quadratic one
    recipes: list[Comparison] = field(default_factory=list)
    moved_by: str | None = None  # RECIPE: which switch moves the comparison most, where it does not hold
    ranked_under: list[tuple[str, Ranking]] = field(default_factory=list)  # the same configurations per other recipe

    @property
    def size(self) -> str:
        low, high = format_bytes(self.low), format_bytes(self.high)
        return low if high == low else f"{low}-{high}"

    @property
    def holds(self) -> bool | None:
        """RECIPE: whether the comparison holds under every other recipe that ran both its
        configurations (None: none did)."""
        asked = [c for c in self.recipes if c.relation is not None]
        if self.compared is None or not asked:
            return None
        return all(c.relation == self.compared.relation for c in asked)

    @property
    def not_asked(self) -> list[str]:
        """The other recipes that did not run both of the comparison's configurations."""
        return [c.recipe for c in self.recipes if c.relation is None]


@dataclass(frozen=True)
class WidthGroup:
    width: int
    ranking: Ranking


@dataclass(frozen=True)
class Lead:
    figures: list[Figure]
    summary: list[Sentence]
    lines: list[PointLine]
    state_point: Column | None
    states: list[StateGroup]
    widths: list[WidthGroup]
    kernel: KernelTable | None
    fidelity: FidelityHeadline | None
    assumed: bool  # some ranked entry relied on ASSUMED_TIME


def state_value(run: Run, key: str) -> object:
    """A run's value of a state knob: a model size (d_model, ...) or a method option as resolved."""
    if key in VARIANT_SIZES:
        return getattr(run.model.config.model, key, None)
    resolved = run.record["method"].get("resolved") or {}
    options = (run.model.config.method.options if run.model.config.method else None) or {}
    return resolved.get(key, options.get(key))


def entry(rows: list[Row], row: Row, column: Column) -> Entry:
    cell = row.cells[column]
    exact, assumed = exact_at(row, cell, column)
    return Entry(row, cell, cell.median("state_bytes"), exact, assumed, failed=optimisation_failed(rows, row, column))


def ranked(rows: list[Row], column: Column) -> list[Entry]:
    """The column's cells with two or more seeds, best mean first; cells that are one result
    (rules.same_result) once, under the exact method where one is exact, the others named."""
    found = sorted((entry(rows, r, column) for r in rows if column in r.cells and len(r.cells[column].values()) >= 2),
                   key=lambda e: (-e.cell.mean(), not e.exact, known.method_rank(e.row.method), e.row.variant))
    kept: list[Entry] = []
    for e in found:
        twin = next((i for i, k in enumerate(kept) if same_result(k.cell, e.cell)), None)
        if twin is None:
            kept.append(e)
        else:
            kept[twin] = replace(kept[twin], same=(*kept[twin].same, e.row.label))
    return kept


def state_limit(ranking: Ranking) -> float | None:
    """The most state a cell may hold to be compared with ``ranking``'s leaders: the largest
    leader's, widened by the equal-state band (None: any state, when a leader has none recorded).
    Where exact attention is among the leaders, only its leaders set the limit: a sub-quadratic
    cell tied with it while holding more state would otherwise let itself in."""
    exact = [e for e in ranking.leaders if e.exact]
    states = [e.state for e in exact or ranking.leaders]
    return None if not states or None in states else max(states) * (1 + STATE_BAND)


def point_line(column: Column, where: str, entries: list[Entry]) -> PointLine:
    best = Ranking.of(entries)
    limit = state_limit(best)
    sub = [e for e in entries if not e.exact and (limit is None or (e.state is not None and e.state <= limit))]
    return PointLine(column, where, best, Ranking.of(sub))


def state_groups(entries: list[Entry], others: dict[str, list[Entry]] | None = None,
                 switches: dict[str, list[Entry]] | None = None) -> list[StateGroup]:
    """The equal-state groups (rules.equal_state_groups) of at least two methods, each with its
    comparison, asked again under each other recipe in ``others`` (recipe -> its entries at the
    point); ``switches``: the entries of one-switch recipes, which name what moves a comparison."""
    groups = []
    for states in equal_state_groups(sorted({e.state for e in entries if e.state})):
        members = [e for e in entries if e.state in states]
        if len({e.row.method for e in members}) >= 2:
            knobs = sorted({k for e in members for k in e.knobs.sizes})
            other = sorted((others or {}).items())
            group = StateGroup(states[0], states[-1], Ranking.of(members), knobs, comparison(members))
            group = replace(group, ranked_under=[
                (r, Ranking.of([e for e in (same_configuration(m, found) for m in members) if e is not None]))
                for r, found in other])
            if group.compared:
                group = replace(group, recipes=[asked_under(group.compared, r, found) for r, found in other])
                if group.holds is False:
                    group = replace(group, moved_by=moved_most(group.compared, switches or {}))
            groups.append(group)
    return groups


def comparison(members: list[Entry]) -> Comparison | None:
    """EQUAL_STATE: a band's best sub-quadratic cell against its best exact one, under the suite's recipe."""
    exact, sub = best_of([e for e in members if e.exact]), best_of([e for e in members if not e.exact])
    if exact is None or sub is None:
        return None
    return Comparison(SUITE_RECIPE, sub, exact, relation(sub.cell, exact.cell))


def same_configuration(entry: Entry, found: list[Entry]) -> Entry | None:
    """The cell of ``entry``'s configuration (method and variant) among another recipe's ``found``."""
    return next((e for e in found if (e.row.method, e.row.variant) == (entry.row.method, entry.row.variant)), None)


def asked_under(compared: Comparison, recipe: str, found: list[Entry]) -> Comparison:
    """RECIPE: ``compared`` asked of the same two configurations' cells under ``recipe``."""
    sub, exact = same_configuration(compared.sub, found), same_configuration(compared.exact, found)
    both = sub is not None and exact is not None
    return Comparison(recipe, sub, exact, relation(sub.cell, exact.cell) if both else None)


def moved_most(compared: Comparison, switches: dict[str, list[Entry]]) -> str:
    """RECIPE: the switch whose one-switch runs move the gap between ``compared``'s two cells the most
    (the gap's change in points, where both configurations ran with that switch alone)."""
    gap = compared.sub.cell.mean() - compared.exact.cell.mean()
    moves = {}
    for switch, found in switches.items():
        asked = asked_under(compared, switch, found)
        if asked.relation is not None:  # both configurations ran with this switch alone
            moves[switch] = asked.sub.cell.mean() - asked.exact.cell.mean() - gap
    if not moves:
        return "no run on the board sets one switch alone, so which switch moves it is not measured here"
    switch = max(moves, key=lambda k: abs(moves[k]))
    return f"the switch that moves it most is {switch} ({100 * moves[switch]:+.1f} points on the gap)"


def width_groups(entries: list[Entry]) -> list[WidthGroup]:
    """Per model width with two methods at their usual other options: those cells, ranked."""
    by_width: dict[int, list[Entry]] = {}
    for e in entries:
        if e.knobs.width_only and e.width is not None:
            by_width.setdefault(e.width, []).append(e)
    return [WidthGroup(w, Ranking.of(found)) for w, found in sorted(by_width.items())
            if len({e.row.method for e in found}) >= 2]


def extra_state_sizes(rows: list[Row], column: Column) -> int:
    """How many state sizes the methods ran at on ``column`` beyond one each."""
    sizes = {(r.method, r.cells[column].median("state_bytes")) for r in rows if column in r.cells}
    return len({s for s in sizes if s[1] is not None}) - len({m for m, state in sizes if state is not None})


def state_bound_point(rows: list[Row], columns: list[Column]) -> Column | None:
    """The recall point where the methods ran at the most state sizes (ties: more pairs, then
    longer), if a method ran at more than one anywhere."""
    recall = [c for c in columns if c.recall and extra_state_sizes(rows, c) > 0]
    return max(recall, key=lambda c: (extra_state_sizes(rows, c), c.num_kv_pairs, c.seq_len or 0), default=None)


def lead_group(rows: list[Row]) -> tuple[str, list[Row]]:
    """The (budget, device) group the first screen's figures show: the one with the most recall cells."""
    groups = by_device_and_budget(rows)
    (device, budget), group = max(groups.items(), key=lambda kv: (
        sum(c.recall for r in kv[1] for c in r.cells), sum(len(r.cells) for r in kv[1])))
    return f"{budget} budget, {device}", group


def lead(rows: list[Row], columns: list[Column], runs: list[Run], costs: dict[str, CellCost] | None = None) -> Lead:
    """The first screen of a board with rows; its figures are for the lead group. It ranks the rows
    of the suite's recipe; the other recipes' rows ask its equal-state comparisons again (RECIPE).
    ``costs``: the cells' costs (costs.cell_costs of ``runs``, computed here when not given)."""
    figures: list[Figure] = []
    lines, states, widths, state_point = [], [], [], None
    everyone, rows = rows, [r for r in rows if r.recipe == SUITE_RECIPE]
    if rows:
        where, group = lead_group(rows)
        state_point = state_bound_point(group, columns)
        model = state_point.model if state_point else None
        usual = [r for r in group if not r.variant]
        recall = [c for c in columns if c.recall and (state_point is None or c.model == model)]
        figures += recall_figures(usual, recall, where)[:1]
        if state_point:
            figures += state_figures(group, [state_point], where)
            hardware = {(r.budget, r.device) for r in group}
            others: dict[str, list[Row]] = {}
            for row in everyone:
                if row.recipe != SUITE_RECIPE and (row.budget, row.device) in hardware and row.tier == "verified":
                    others.setdefault(row.recipe, []).append(row)
            asked = {recipe: ranked(found, state_point) for recipe, found in others.items()}
            switch = {recipe: recipes.one_switch(found[0].example.record["config"]) for recipe, found in others.items()}
            states = state_groups(ranked(group, state_point),
                                  {r: found for r, found in asked.items() if switch[r] is None},
                                  {switch[r]: found for r, found in asked.items() if switch[r]})
            widths = width_groups(ranked(group, state_point))
        groups = by_device_and_budget(rows)
        ordered = [c for t in board_tables(rows, columns) for c in t.columns]  # as the tables show them
        for (device, budget), found in groups.items():
            for column in (c for c in ordered if any(c in r.cells for r in found)):
                lines.append(point_line(column, f"{budget} budget, {device}" if len(groups) > 1 else "",
                                        ranked(found, column)))
    kernel = kernel_table(runs)
    rankings = [r for line in lines for r in (line.best, line.best_sub)] + [g.ranking for g in (*states, *widths)]
    used = [e for r in rankings for e in (*r.leaders, *r.behind)]
    fidelity = fidelity_headline(runs)
    costs = cell_costs(runs) if costs is None else costs
    measured = [(column, host, lengths) for column in recall_points(columns)
                for host, lengths in sorted(at_lengths([r for r in rows if not r.variant], column, costs).items())]
    # The longest length first: the lead opens with what each method keeps and saves where it is
    # meant to pay (the long board's 4,096 tokens before a short board's point tested at 256).
    measured.sort(key=lambda found: -longest_with_reference(found[2]))
    paying = [pays_sentence(column, host, lengths) for column, host, lengths in measured]
    summary = [s for s in (*paying, scale_sentence(everyone), paper_scale_sentence(everyone, columns),  # all it ran
                           state_sentence(state_point, states), recipe_sentence(state_point, states),
                           length_gap_sentence(everyone, kernel),
                           fidelity_sentence(fidelity)) if s]
    return Lead(figures, summary, lines, state_point, states, widths, kernel, fidelity,
                any(e.assumed for e in used))


def longest_with_reference(lengths: dict[int, list[AtLength]]) -> int:
    """The longest length with exact attention's accuracy and cost (0: none)."""
    reference = known.reference_method()
    return max((n for n, cells in lengths.items() if any(c.row.method == reference for c in cells)), default=0)


def pays_sentence(column: Column, host: str, lengths: dict[int, list[AtLength]]) -> Sentence | None:
    """AT_LENGTH: at the longest length with exact attention's accuracy and cost, what each other
    method keeps (its accuracy, clearly below exact attention's or not) and saves (time, memory)."""
    reference = known.reference_method()
    length = longest_with_reference(lengths)
    if not length:
        return None
    cells = lengths[length]
    exact = next(c for c in cells if c.row.method == reference)
    others = sorted((c for c in cells if c is not exact), key=lambda c: known.method_rank(c.row.method))
    if not others:
        return None
    how = "trained at that length" if length == column.seq_len else f"trained at {column.seq_len:,}, tested only"
    parts = []
    for c in others:
        loses = stats.clearly_ahead(exact.estimate(), c.estimate())
        memory = c.cost.ratio(INFERENCE, length, "memory")
        parts.append(f"{c.row.method} {accuracy_text(c.values)}{' (clearly below)' if loses else ''} at "
                     f"{c.cost.ratio(INFERENCE, length):.2f}× its time" +
                     (f" and {memory:.2f}× its memory" if memory is not None else ""))
    return Sentence("AT_LENGTH", f"At {length:,} tokens on {column.label} ({how}; cost on {host}), exact attention "
                    f"scores {accuracy_text(exact.values)}; " + "; ".join(parts) + ".")


def in_words(names: list[str]) -> str:
    """'a', 'a and b', 'a, b and c'."""
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def state_sentence(point: Column | None, groups: list[StateGroup]) -> Sentence | None:
    """EQUAL_STATE: per equal-state band holding both kinds, how its best sub-quadratic cell stands
    to its best exact cell (rules.relation), both named with the knob that set their state; the
    bands without an exact cell are named as such, with no verdict. A comparison another recipe
    does not confirm is left to the RECIPE sentence."""
    compared, alone = [], []
    for group in groups:
        cells = group.ranking.leaders + group.ranking.behind
        if not any(e.exact for e in cells):
            alone.append(group.size)
        elif group.compared and group.holds is not False:
            c = group.compared
            both = " under both recipes" if group.holds else ""
            missing = "".join(f" (recipe={r} did not run both)" for r in group.not_asked)
            compared.append(f"at {group.size}, {c.sub.named} {c.relation} {c.exact.named}{both}{missing}")
    if point is None or not (compared or alone):
        return None
    text = f"On {point.label}, at equal state: {'; '.join(compared)}." if compared else f"On {point.label}:"
    if alone:
        sizes = ", ".join(alone[:-1]) + (" or " if len(alone) > 1 else "") + alone[-1]
        text += (f" No exact-attention cell holds {sizes}, so nothing there is compared with it." if compared else
                 f" no exact-attention cell holds {sizes}, so nothing there is compared with it.")
    return Sentence("EQUAL_STATE", text)


def recipe_sentence(point: Column | None, groups: list[StateGroup]) -> Sentence | None:
    """RECIPE: the equal-state comparisons another recipe answers differently, each with both answers
    and what moves it; None where every comparison asked again holds."""
    moved = [g for g in groups if g.holds is False]
    if point is None or not moved:
        return None
    parts = []
    for g in moved:
        c = g.compared
        under = "; ".join(f"under recipe={o.recipe} {o.relation}" for o in g.recipes if o.relation)
        parts.append(f"at {g.size}, {c.sub.named} {c.relation} {c.exact.named} under the suite's recipe, {under}: "
                     f"{g.moved_by}")
    return Sentence("RECIPE", f"On {point.label}, the ordering depends on the training recipe: {'; '.join(parts)}.")


def best_of(entries: list[Entry]) -> Entry | None:
    """The best of some cells by the ties rule: the fastest solved one, else the highest mean."""
    ranking = Ranking.of(entries)
    return next(iter(ranking.fastest or ranking.leaders), None)


def fidelity_sentence(found: FidelityHeadline | None) -> Sentence | None:
    """FIDELITY: per score scale, the most and least faithful maps on the output error (and on the
    attention rows' total variation where it names others); captured sources of a model that did not
    learn are named and not ranked; which maps' denominators are no estimate of softmax's."""
    scales = [s for s in (found.scales if found else []) if len(s.rows) >= 2]
    if not scales:
        return None
    parts, unranked = [], []
    for scale in scales:
        if not scale.ranked:
            unranked.append(scale.name)
            continue
        by_tv = sorted(scale.rows, key=lambda r: r.errors["attention_tv"])
        tv = ("" if (by_tv[0].method, by_tv[-1].method) == (scale.rows[0].method, scale.rows[-1].method) else
              f" (by attention total variation: {by_tv[0].method}, {by_tv[-1].method})")
        parts.append(f"at {scale.name}, {scale.rows[0].method} most, {scale.rows[-1].method} least{tv}")
    text = f"Fidelity at N = {found.length:,.0f}, by output error, per score scale (the spread of q·k/√D)"
    text += f": {'; '.join(parts)}." if parts else "."
    if unranked:
        text += (f" Not ranked: {in_words(unranked)}, queries and keys of a model that did not learn (near-"
                 "uniform attention, which any map approximates).")
    others = found.not_estimates()
    if others:
        text += (f" {in_words(others)} declare a normaliser of their own, not an estimate of softmax's: their "
                 "denominator error is not ranked." if len(others) > 1 else
                 f" {others[0]} declares a normaliser of its own, not an estimate of softmax's: its denominator "
                 "error is not ranked.")
    return Sentence("FIDELITY", text)


def spread_of(values: list[float]) -> str:
    """A range of numbers as text: '18,449-95,937', or one number."""
    low, high = min(values), max(values)
    return f"{low:,.0f}" if low == high else f"{low:,.0f}-{high:,.0f}"


def task_lengths(runs: list[Run]) -> str:
    """Per task: the sequence lengths its runs learned on ('mqar at 64 tokens')."""
    found: dict[str, set[str]] = {}
    for run in runs:
        task = run.record["task"]
        low, high = task.get("min_length"), task.get("max_length")
        length = f"{low}-{high}" if low and high else str(task.get("seq_len"))
        found.setdefault(run.task, set()).add(length)
    return ", ".join(f"{task} at {' / '.join(sorted(v, key=len))} tokens" for task, v in sorted(found.items()))


def board_runs(rows: list[Row]) -> list[Run]:
    return list({id(r): r for row in rows for cell in row.cells.values() for r in cell.every_run()}.values())


def scale_sentence(rows: list[Row]) -> Sentence | None:
    """SCALE: what the board ran, in numbers read from its records."""
    runs = board_runs(rows)
    if not runs:
        return None
    params = [r.metric("param_count") for r in runs if r.metric("param_count")]
    steps = [r.model.config.budget.max_steps for r in runs if r.model.config.budget and r.model.config.budget.max_steps]
    threads = sorted({str(r.record["config"].get("cpu_threads")) for r in runs
                      if r.device == "cpu" and r.record["config"].get("cpu_threads")})
    methods = sorted({r.method for r in runs}, key=known.method_rank)
    text = (f"The board: {len(methods)} attention methods ({', '.join(methods)}) trained in {len(runs):,} runs on "
            f"{task_lengths(runs)}")
    if params:
        text += f"; models of {spread_of(params)} parameters"
    if steps:
        text += f"; at most {max(steps):,} steps per run"
    if threads:
        text += f" on {' / '.join(threads)} CPU thread{'' if threads == ['1'] else 's'}"
    return Sentence("SCALE", text + ".")


def paper_scale_sentence(rows: list[Row], columns: list[Column]) -> Sentence | None:
    """PAPER_SCALE: said whenever the board ran on a CPU; the published rows named where they show."""
    if not any(r.device == "cpu" for r in rows):
        return None
    published = "; the published LRA rows are the paper's own, not rerun here" if any(
        c.task in LRA_TASKS for c in columns) else ""
    return Sentence("PAPER_SCALE", "These are CPU-scale results: they compare the methods at these sizes and "
                    f"budgets, not at the papers' scale{published}.")


def length_gap_sentence(rows: list[Row], kernel: KernelTable | None) -> Sentence | None:
    """LENGTH_GAP: the longest length accuracy was measured at, against the lengths the kernel
    records timed and where they place the crossovers."""
    runs = board_runs(rows)
    lengths = [r.record["task"].get("max_length") or r.record["task"].get("seq_len") for r in runs]
    # The longer test lengths a recall run was also scored at (evaluation only) count as measured.
    lengths += [point.get("seq_len") for r in runs for point in (r.metrics.get("length_accuracy") or [])
                if isinstance(point, dict)]
    lengths = [n for n in lengths if isinstance(n, int) and not isinstance(n, bool) and n > 0]
    if not lengths or kernel is None or kernel.shortest is None:
        return None
    longest = max(lengths)
    crossing = (f", and place the crossovers with exact attention between about {round(min(kernel.lengths)):,} and "
                f"{round(max(kernel.lengths)):,} tokens" if kernel.lengths else "")
    if longest < kernel.shortest:
        return Sentence("LENGTH_GAP", f"Accuracy was measured on sequences of at most {longest:,} tokens; the kernel "
                        f"records time from {round(kernel.shortest):,} tokens up{crossing}: accuracy and speed were "
                        "not measured at the same length.")
    return Sentence("LENGTH_GAP", f"Accuracy was measured on sequences of up to {longest:,} tokens; the kernel records "
                    f"time from {round(kernel.shortest):,} tokens up{crossing}.")


@dataclass(frozen=True)
class KernelTable:
    """Per kernel time (and device, shape): where each method overtakes exact attention."""

    methods: list[str]
    rows: list[tuple[str, dict[str, str]]]  # (what was timed, where; per method its crossover in words)
    against: str  # what exact attention is: the faster of these at each length
    provenance: str
    lengths: list[float] = field(default_factory=list)  # every crossover inside the measured range
    shortest: float | None = None  # the shortest length any kernel record timed


def kernel_table(runs: list[Run]) -> KernelTable | None:
    """Per device (and shape) and kernel time: where each method overtakes exact attention for
    good (suite.scaling's rule), and which records say it; None without kernel records."""
    kernel = [r for r in runs if r.kind == "kernel"]
    points = [p for run in kernel for p in sweep_points(run)]
    metrics = declared("kernel")
    rows, methods, lengths = [], {}, []
    for where, group in sweep_groups("kernel", points) if points else ():
        for name in KERNEL_TIMES:
            found = crossovers(group, name, metrics[name])
            if found:
                rows.append((f"{metrics[name].label}, {where}", {m: crossover_text(c) for m, c in found.items()}))
                methods.update(dict.fromkeys(found))
                lengths += [c["length"] for c in found.values() if c["where"] == "within_grid"]
    if not rows:
        return None
    return KernelTable(sorted(methods, key=known.method_rank), rows, " / ".join(reference_names()),
                       provenance_text(kernel), lengths, min(p.x for p in points))


def crossover_text(found: dict) -> str:
    where, length = found["where"], found.get("length")
    if where == "within_grid":
        return f"from N≈{compact_count(round(length))}"
    if where == "below_grid":
        return f"faster at every N measured (from {compact_count(length)})"
    if where == "beyond_grid":
        return f"not faster up to N={compact_count(found['checked_up_to'])}"
    return "not measured beside it"


def provenance_text(runs: list[Run]) -> str:
    """Which commits the records come from, and how many ran on a checkout with uncommitted changes."""
    commits = sorted({r.model.env.git_commit[:7] if r.model.env.git_commit else "not recorded" for r in runs})
    dirty = sum(bool(r.model.env.git_dirty) for r in runs)
    text = f"From {len(runs)} kernel record(s), commit(s) {', '.join(commits)}"
    return text + (f"; {dirty} of them ran on a checkout with uncommitted changes (dirty tree)." if dirty else ".")
