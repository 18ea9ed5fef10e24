"""The schema of a run's config, checked once at the boundary (``validate``); code past it trusts it.

The config stays the plain dict Hydra composes (records store it as it is, and its hash must not
change), so the schema is a set of ``TypedDict`` s that pydantic checks in strict mode: no string is
read as a number, ``true`` is no count, 1.5 is no seed. Defaults live in conf/*.yaml only; the schema
declares types and ranges, and which keys may be absent (``NotRequired``: records written before a
key existed, read with ``.get`` by the code). Each mistake is one line naming the key and the value.

This module holds what every run reads and the rules and blocks the modes share; each mode's own
keys and grids are checked by its schema, ``Run`` in suite/modes/<mode>/config.py, which the caller
hands in (``suite.modes.run_schemas()``): this module imports no mode, and the modes' schemas import it.
Not checked here: a method's options (``methods/`` own them, checked when the method is built) and
a task's own options (``tasks/`` check theirs when loading); only the task keys the harness reads.
"""

import difflib
import re
import typing
from collections.abc import Iterable, Mapping
from functools import cache
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    ConfigDict,
    Field,
    Strict,
    TypeAdapter,
    ValidationError,
    ValidationInfo,
    WrapValidator,
    with_config,
)
from typing_extensions import NotRequired, TypedDict, is_typeddict

from suite import recipe
from suite.errors import ConfigError
from suite.logger import LOGGERS
from suite.schema import INT_LIMIT

DEVICES = ("auto", "cpu", "cuda")
PROTOCOLS = ("single", "lr_sweep")
BACKBONES = ("encoder", "decoder")
MIXERS = ("attention", "conv")  # a trunk layer: the method under test, or a short causal convolution
POSITIONS = ("learned", "none")
CLOSED = ConfigDict(extra="forbid")  # a key the harness does not read is a typo
OPEN = ConfigDict(extra="allow")  # the rest of the block belongs to someone else (a task, a mode)


# -- rules: a type, and the words that say what it must be ----------------------------------------

class Broken(ValueError):
    """What a value breaks: ``<key> must <words>, got <value>``."""

    def __init__(self, words: str) -> None:
        super().__init__(words)
        self.words = words


class Line(ValueError):
    """A mistake said in a whole line (a choice, a rule across keys); ``located``: written after
    the key of the block it is about."""

    def __init__(self, text: str, located: bool = False) -> None:
        super().__init__(text)
        self.text, self.located = text, located


def rule(words: str) -> WrapValidator:
    """Replace pydantic's messages for the wrapped type by one: ``<key> must <words>, got <value>``."""
    def check(value, handler):
        try:
            return handler(value)
        except ValidationError:
            raise Broken(words) from None
    return WrapValidator(check)


def among(choices: tuple[str, ...]) -> AfterValidator:
    """A value from ``choices`` (the message is the enclosing rule's)."""
    def check(value):
        if value not in choices:
            raise ValueError(value)
        return value
    return AfterValidator(check)


def one_of(noun: str, choices, valid: str = "valid", hint: bool = True) -> AfterValidator:
    """A choice named on its own (``device=``, ``logger=``): ``unknown <noun> 'x'; <valid>: ...``,
    with the choice meant when one is close (``hint``). ``choices`` may be a function of the check's
    context (``validate``'s: the modes' names are the caller's, not this module's)."""
    def check(value, info: ValidationInfo):
        names = choices(info.context) if callable(choices) else choices
        if value not in names:
            raise Line(unknown_choice(noun, value, names, valid, hint))
        return value
    return AfterValidator(check)


def choice(choices: tuple[str, ...]) -> Any:
    """One string from ``choices``."""
    return Annotated[str, Strict(), among(choices), rule(f"be one of {', '.join(choices)}")]


def listed(words: str, choices: tuple[str, ...], empty: bool = False) -> Any:
    """A list of strings from ``choices``; non-empty unless ``empty``."""
    return Annotated[list[Annotated[str, Strict(), among(choices)]], Field(min_length=0 if empty else 1),
                     rule(f"be a {'' if empty else 'non-empty '}list {words} {', '.join(choices)}")]


def at_most(limit: int, floor: int = 1) -> AfterValidator:
    """A number in [floor, limit] (None passes): the rule's message for its type, this one for its range."""
    def check(value):
        if value is not None and not floor <= value <= limit:
            raise Broken(f"be in [{floor}, {limit}]")
        return value
    return AfterValidator(check)


# Bare: checked, but saying nothing of their own; the rule around them says what they must be.
# A count is at most what a record holds (suite/schema.py INT_LIMIT, 64 bits): whatever the config
# lets start, the record schema lets be written.
BareCount = Annotated[int, Strict(), Field(gt=0, le=INT_LIMIT)]
BareNumber = Annotated[float, Strict(), Field(allow_inf_nan=False)]  # strict: ints pass, bools and strings do not
Integer = Annotated[int, Strict(), rule("be an integer")]
Bool = Annotated[bool, Strict(), rule("be true or false")]
Count = Annotated[int, Strict(), Field(gt=0), rule("be a positive integer"), at_most(INT_LIMIT)]
CountOrNull = Annotated[Annotated[int, Strict(), Field(gt=0)] | None, rule("be a positive integer or null"),
                        at_most(INT_LIMIT)]
CountOrZero = Annotated[int, Strict(), Field(ge=0), rule("be an integer >= 0"), at_most(INT_LIMIT, floor=0)]
Counts = Annotated[list[BareCount], Field(min_length=1), rule("be a non-empty list of positive integers")]
Positive = Annotated[BareNumber, Field(gt=0), rule("be a finite number > 0")]
PositiveOrNull = Annotated[Annotated[BareNumber, Field(gt=0)] | None, rule("be a finite number > 0 or null")]
NonNegative = Annotated[BareNumber, Field(ge=0), rule("be a finite number >= 0")]
_Folder = Annotated[str, Strict(), Field(pattern=r"\S")]  # not empty, not blank
# What Linux takes of a path (PATH_MAX and NAME_MAX, in bytes): a longer one fails at the first stat.
PATH_BYTES, PART_BYTES = 4095, 255


def fits_file_system() -> AfterValidator:
    """A path the file system can take (the rule around it says what else it must be)."""
    def check(value):
        if len(value.encode()) > PATH_BYTES or any(len(part.encode()) > PART_BYTES for part in value.split("/")):
            raise Broken(f"be a path of at most {PATH_BYTES} bytes, each folder's name at most {PART_BYTES}")
        return value
    return AfterValidator(check)
Name = Annotated[str, Strict(), Field(min_length=1), rule("be a name")]


# Every generator a run seeds (torch, numpy, the data orders derived from it) takes these; torch
# refuses a seed beyond 64 bits, numpy one beyond 32.
SEED_LIMIT = 2**32 - 1
Seed = Annotated[Integer, at_most(SEED_LIMIT, floor=0)]
# torch.set_num_threads takes any count, and crashes the process far above the cores a machine has.
THREADS_LIMIT = 1024
Threads = Annotated[CountOrNull, at_most(THREADS_LIMIT)]


# -- the blocks of the config ------------------------------------------------------------------------

@with_config(CLOSED)
class Method(TypedDict):
    name: Name  # the method registry (methods.get) names the valid ones
    impl: Name  # the method checks it against its implementations
    options: Annotated[dict[str, Any], rule("be a mapping of the method's options")]
    version: NotRequired[Count]  # the method's code version, written in by run() (a record's config has it)
    package: NotRequired[str]  # an outside method's distribution, name==version, written in by run()


@with_config(OPEN)
class Task(TypedDict):
    """The keys the harness reads; the task checks the rest of its block when it loads."""
    name: Name
    seq_len: Count
    backbone: choice(BACKBONES)


@with_config(CLOSED)
class Budget(TypedDict):
    name: Name  # picks the mode's grid
    max_steps: Count
    batch_size: Count
    lr: Positive
    weight_decay: NonNegative
    warmup_steps: CountOrZero
    grad_clip: PositiveOrNull
    eval_every: Count
    eval_batches: CountOrNull
    num_train: CountOrNull
    num_val: CountOrNull
    num_test: CountOrNull
    checkpoint_every: NotRequired[CountOrNull]
    target_val_accuracy: NotRequired[Annotated[Annotated[BareNumber, Field(gt=0, le=1)] | None,
                                               rule("be a number in (0, 1] or null")]]


def heads_divide_width(model: dict) -> dict:
    if model["d_model"] % model["num_heads"]:
        raise Line(f"model.num_heads={model['num_heads']} does not divide model.d_model={model['d_model']}")
    if "attention" not in model.get("mixers", ("attention",)):
        raise Line(f"model.mixers={model['mixers']} has no attention layer: the method would never run")
    return model


@with_config(CLOSED)
class _Model(TypedDict):
    name: NotRequired[Name]
    d_model: Count
    num_layers: Count
    num_heads: Count
    d_ff: Count
    dropout: Annotated[BareNumber, Field(ge=0, lt=1), rule("be a number in [0, 1)")]
    mixers: NotRequired[listed("of", MIXERS)]
    position: NotRequired[choice(POSITIONS)]
    mlp: NotRequired[Bool]
    conv_kernel: NotRequired[Count]
    qkv_conv: NotRequired[Annotated[BareCount | None, rule("be a positive integer (a kernel size) or null")]]


Model = Annotated[_Model, AfterValidator(heads_divide_width)]


def sweep_lists(protocol: dict) -> dict:
    if protocol["name"] == "lr_sweep" and not {"lrs", "seeds"} <= set(protocol):
        raise Line("protocol=lr_sweep needs protocol.lrs and protocol.seeds")
    return protocol


def distinct(values: list) -> list:
    if len(set(values)) != len(values):
        raise ValueError
    return values


@with_config(CLOSED)
class _Protocol(TypedDict):
    name: Annotated[str, one_of("protocol", PROTOCOLS, "valid protocols")]
    lrs: NotRequired[Annotated[list[Annotated[BareNumber, Field(gt=0)]], Field(min_length=1),
                               rule("be a non-empty list of positive numbers")]]
    seeds: NotRequired[Annotated[list[Annotated[int, Strict(), at_most(SEED_LIMIT, floor=0)]], Field(min_length=1),
                                 AfterValidator(distinct), rule("be a non-empty list of distinct integers")]]
    bracket: NotRequired[Annotated[int, Strict(), Field(ge=0), rule("be an integer >= 0 (rates to add past an edge)")]]


Protocol = Annotated[_Protocol, AfterValidator(sweep_lists)]


@with_config(CLOSED)
class Logger(TypedDict):
    name: Annotated[str, one_of("logger", tuple(LOGGERS), "valid loggers")]
    project: NotRequired[Name]  # wandb's settings (conf/logger/wandb.yaml)
    mode: NotRequired[Name]
    dir: NotRequired[Annotated[_Folder | None, rule("name a folder or be null")]]


@with_config(OPEN)
class ModeName(TypedDict):
    """What every mode has; the mode's own keys are checked by its schema (``validate``'s ``run_schemas``)."""
    name: Annotated[str, one_of("mode", lambda context: tuple(context["run_schemas"]), "valid modes")]


@with_config(OPEN)
class BudgetName(TypedDict):
    name: Name  # a mode that reads only its grid reads only this of the budget


def switch(name: str) -> Any:
    """A recipe switch of string values: one of them (suite/recipe.py's SWITCHES)."""
    return choice(recipe.SWITCHES[name][0])


@with_config(CLOSED)
class Recipe(TypedDict):
    """suite/recipe.py's switches (a test keeps the two lists equal)."""
    name: Annotated[str, one_of("recipe", tuple(recipe.RECIPES), "valid recipes")]
    init: switch("init")
    out_scale: Bool
    qkv: switch("qkv")
    residual: switch("residual")
    embed_dropout: Annotated[Annotated[BareNumber, Field(ge=0, lt=1)] | None,
                             rule("be a number in [0, 1) or null (model.dropout)")]
    conv_skip: Bool
    head: switch("head")
    schedule: switch("schedule")


DataDir = Annotated[_Folder, rule("name a folder (default: $SUITE_DATA_DIR, else ~/.cache/attention-suite)"),
                    fits_file_system()]


@with_config(OPEN)
class Training(TypedDict):
    """The blocks a mode that trains a model reads (train; fidelity, for the model it captures from)."""
    data_dir: DataDir
    task: Task
    budget: Budget
    model: Model
    recipe: NotRequired[Recipe]  # absent from records written before recipes (the suite's)


# What every run reads. Open at the top: the blocks a mode reads are checked by its own schema (its
# config.py's ``Run``; the kernel mode runs from a dict of a few keys, on a GPU host without Hydra),
# and a preset may keep its own lookup tables there (experiment=zoology_mqar's `zoology`); a
# misspelled top-level key is refused by Hydra when composing.
@with_config(OPEN)
class RunConfig(TypedDict):
    seed: Seed
    # No hint among three short names: 'gpu' is closer to 'cpu' than to the 'cuda' it means.
    device: Annotated[str, one_of("device", DEVICES, hint=False)]
    results_dir: Annotated[_Folder, rule("name a folder (default: results)"), fits_file_system()]
    data_dir: NotRequired[DataDir]
    force: NotRequired[Bool]
    resume: NotRequired[Bool]
    cpu_threads: NotRequired[Threads]
    memory_cap_bytes: NotRequired[Annotated[BareCount | None, rule("be a positive integer (bytes) or null")]]
    method: Method
    mode: ModeName
    logger: NotRequired[Logger]
    protocol: NotRequired[Protocol]


# -- the boundary -----------------------------------------------------------------------------------

def validate(config: Mapping, run_schemas: Mapping[str, type]) -> None:
    """Raise ConfigError, one line per mistake (key and value named), unless ``config`` fits the schema:
    every run's (RunConfig) and its mode's, from ``run_schemas`` (each mode's config.py ``Run``, by
    name: ``suite.modes.run_schemas()``; a name none has, RunConfig says so)."""
    context = {"run_schemas": run_schemas}
    problems = mistakes(RunConfig, config, context)
    mode = config.get("mode")
    name = mode.get("name") if isinstance(mode, Mapping) else None
    schema = run_schemas.get(name) if isinstance(name, str) else None
    if schema is not None:  # the blocks this mode reads (disjoint from RunConfig's but for the name)
        problems += mistakes(schema, config, context)
        grids, budget = mode.get("grids"), config.get("budget")
        name = budget.get("name") if isinstance(budget, Mapping) else None
        if isinstance(grids, Mapping) and isinstance(name, str) and name not in grids:
            problems.append(f"mode={mode['name']} has no grid for budget {name!r}; valid budgets: {', '.join(grids)}")
    if problems:
        raise ConfigError("\n".join(problems))


def mistakes(schema: type, config: Mapping, context: Mapping) -> list[str]:
    """One line per way ``config`` breaks ``schema`` (``context``: what ``validate`` hands its rules)."""
    try:
        adapter(schema).validate_python(config, context=context)
    except ValidationError as exc:
        return [describe(error, schema) for error in exc.errors()]
    return []


@cache
def adapter(schema: type) -> TypeAdapter:
    return TypeAdapter(schema)  # built once: it costs milliseconds, and a sweep validates every job


def shown(value: Any, limit: int = 100) -> str:
    """``repr(value)``, cut to ``limit`` characters with its length said: one line stays one line."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text):,} characters)"


def describe(error: Mapping, schema: type) -> str:
    """The line for one pydantic error: which key, what it must be, what it is."""
    loc = error["loc"]
    key = ".".join(map(str, loc))
    kind, value = error["type"], error.get("input")
    said = error.get("ctx", {}).get("error") if kind == "value_error" else None
    if isinstance(said, Broken):
        return f"{key} must {said.words}, got {shown(value)}"
    if isinstance(said, Line):
        return f"{key}: {said.text}" if said.located else said.text
    if kind == "extra_forbidden":
        return unknown_key(key, [".".join(map(str, (*loc[:-1], k))) for k in declared_keys(schema, loc[:-1])])
    if kind == "missing":
        return f"missing config key {key!r}"
    if kind in ("dict_type", "typed_dict_type"):
        return f"{key} must be a mapping of keys to values, got {shown(value)}"
    return f"{key}: {error['msg']}, got {shown(value)}"


def declared_keys(schema: Any, loc: tuple) -> list[str]:
    """The keys ``schema`` declares at ``loc``, a path into nested TypedDicts (and ``dict[str, X]``,
    e.g. a mode's grids by budget name)."""
    for part in loc:
        schema = unwrapped(schema)
        if is_typeddict(schema):
            schema = typing.get_type_hints(schema, include_extras=True).get(part)
        elif typing.get_origin(schema) is dict:
            schema = typing.get_args(schema)[1]
        else:
            return []
    schema = unwrapped(schema)
    return list(typing.get_type_hints(schema)) if is_typeddict(schema) else []


def declared_paths(schema: Any, prefix: str = "") -> dict[str, Any]:
    """Every key ``schema`` declares, as a dotted path, with its type (nested TypedDicts descended)."""
    schema = unwrapped(schema)
    if not is_typeddict(schema):
        return {}
    found = {}
    for key, tp in typing.get_type_hints(schema, include_extras=True).items():
        found[f"{prefix}{key}"] = tp
        found.update(declared_paths(tp, f"{prefix}{key}."))
    return found


def admits(schema: Any, parts: list[str]) -> bool:
    """Whether ``schema`` declares the key ``parts`` (through nested TypedDicts and mappings by name,
    e.g. a mode's grids by budget), or the key lies in a mapping of any keys whose owner checks them
    (a method's options)."""
    for part in parts:
        schema = unwrapped(schema)
        if is_typeddict(schema):
            hints = typing.get_type_hints(schema, include_extras=True)
            if part not in hints:
                return False
            schema = hints[part]
        elif typing.get_origin(schema) is dict:
            if typing.get_args(schema)[1] is Any:
                return True
            schema = typing.get_args(schema)[1]
        else:
            return False
    return True


def added_key(key: str, run_schemas: Iterable[type]) -> str | None:
    """A key added on the command line (``+key=value``: one the composed config lacks) must be one a
    schema declares (every run's, or a mode's: a key a config may lack) or lie in a mapping whose owner
    checks it (``method.options``: the method refuses an option it lacks); else, as for any misspelled
    key, one line with the key meant. None when it is admitted. ``run_schemas``: every mode's
    (``suite.modes.run_schemas().values()``)."""
    schemas = (RunConfig, *run_schemas)
    if any(admits(schema, key.split(".")) for schema in schemas):
        return None
    return unknown_key(key, [path for schema in schemas for path in declared_paths(schema)])


# A resolver, ``${name:...}`` (alone or inside another interpolation), reads what is outside the
# config (``oc.env`` an environment variable, others files or anything a plugin likes) into it, and
# so into the record; a plain ``${key}`` reads the config only. A backslash before ``$`` escapes it.
RESOLVER = re.compile(r"(?<!\\)\$\{\s*([A-Za-z_][\w.]*)\s*:")
# The keys whose value may come from the environment: where data is found and how logs are kept, which
# define nothing a run measures (conf/config.yaml data_dir, conf/logger/wandb.yaml).
FROM_ENVIRONMENT = {"data_dir": {"oc.env"}, "logger.mode": {"oc.env"}, "logger.dir": {"oc.env"}}


def reads_environment(key: str, value: str) -> str | None:
    """The line refusing a value of ``key`` that reads from outside the config, else None."""
    outside = [name for name in RESOLVER.findall(value) if name not in FROM_ENVIRONMENT.get(key, ())]
    if not outside:
        return None
    if "oc.env" in outside:
        return (f"{key}={value} reads an environment variable into the config, and so into the record, which "
                "holds no environment variable; write the value itself")
    return (f"{key}={value} uses the resolver {outside[0]!r}, which reads from outside the config into the record; "
            "write the value itself")


def environment_problems(unresolved: Any, at: str = "") -> list[str]:
    """A line per value of a composed, unresolved config that reads from outside it, wherever it came
    from (the command line, a preset on the search path, a defaults list)."""
    if isinstance(unresolved, Mapping):
        return [line for key, item in unresolved.items()
                for line in environment_problems(item, f"{at}.{key}" if at else str(key))]
    if isinstance(unresolved, list):
        return [line for i, item in enumerate(unresolved) for line in environment_problems(item, f"{at}[{i}]")]
    problem = reads_environment(at, unresolved) if isinstance(unresolved, str) else None
    return [problem] if problem else []


def unwrapped(tp: Any) -> Any:
    """``tp`` without its Annotated / NotRequired wrappers."""
    while typing.get_origin(tp) in (Annotated, NotRequired):
        tp = typing.get_args(tp)[0]
    return tp


def unknown_key(key: str, known: typing.Collection[str], context: str = "") -> str:
    """``unknown config key 'k'``: the key most likely meant among ``known`` (dotted keys), else the
    valid keys beside it. A misspelled last part is compared with its siblings' names only, so that a
    long shared prefix does not make every sibling look close; a misspelled path with whole keys."""
    parent, _, leaf = key.rpartition(".")

    def children(node: str) -> list[str]:  # each once: several schemas declare the same key
        return list(dict.fromkeys(k.rpartition(".")[2] for k in known if k.rpartition(".")[0] == node))

    if not parent or parent in known or children(parent):
        close = [f"{parent}.{c}".lstrip(".") for c in difflib.get_close_matches(leaf, children(parent), n=1)]
    else:
        close = difflib.get_close_matches(key, [k for k in known if k.count(".") == key.count(".")], n=1)
    if close:
        return f"unknown config key {key!r}; did you mean {close[0]!r}?{context}"
    while parent and parent not in known and not children(parent):  # the deepest part that exists
        parent = parent.rpartition(".")[0]
    where = f"keys of {parent}" if parent else "top-level keys"
    return f"unknown config key {key!r}; valid {where}: {', '.join(children(parent)) or 'none'}{context}"


def unknown_choice(noun: str, value: object, choices: typing.Iterable[str], valid: str = "valid",
                   hint: bool = True) -> str:
    """``unknown method 'favour'; did you mean 'favor'? valid methods: ...`` (no hint when none is close)."""
    choices = list(choices)
    close = difflib.get_close_matches(value, choices, n=1) if hint and isinstance(value, str) else []
    hint = f" did you mean {close[0]!r}?" if close else ""
    return f"unknown {noun} {value!r};{hint} {valid}: {', '.join(choices)}"
