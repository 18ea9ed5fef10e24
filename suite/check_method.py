"""``attention-suite check-method SPEC [--options JSON]``: run the method contract (methods/contract.py)
on any method, a registered name or an import path ``module:Class``, before a run or a submission.

Each failed check is one line on stdout: the method, the check, the implementation, the case (shape,
dtype, causal or not) and the error; a closing count on stderr, with the implementations that
cannot be checked on this machine. Exit 0 when every check passes, 1 when any fails, 2 on bad input
(a spec that names no method, options that are not a JSON object or that the method refuses).
"""

from __future__ import annotations

import argparse
import json
import sys

EXIT_FAILED, EXIT_USER_ERROR = 1, 2
# The largest number an option may be: the checks build the method at small sizes (head dim 64, 200
# tokens), where no option of a built-in method goes past a few hundred; a larger one only makes a
# check run for hours or fill the memory (favor's num_features=100000000).
OPTION_LIMIT = 2**16


def unbounded(options: dict, at: str = "") -> str | None:
    """The first option whose number is beyond OPTION_LIMIT, as ``key=value`` (a number nested in a
    list or object as ``key[0]=value``, ``key.inner=value``); None if none is."""
    items = options.items() if isinstance(options, dict) else enumerate(options)
    for key, value in items:
        where = f"{at}[{key}]" if isinstance(options, list) else (f"{at}.{key}" if at else str(key))
        if isinstance(value, (dict, list)):
            found = unbounded(value, where)
            if found:
                return found
        elif isinstance(value, (int, float)) and not isinstance(value, bool) and not abs(value) <= OPTION_LIMIT:
            return f"{where}={value!r}"
    return None


def positive(text: str) -> float:
    value = float(text)
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a number of seconds > 0, got {text!r}")
    return value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="attention-suite check-method", description=__doc__.split("\n\n")[0])
    parser.add_argument("spec", metavar="SPEC", help="a registered method name, or module:Class")
    parser.add_argument("--options", default="{}", metavar="JSON",
                        help="the method's options as a JSON object, e.g. '{\"feature_dim\": 4}' (default: its own)")
    parser.add_argument("--seconds", type=positive, default=None, metavar="S",
                        help="the longest one check may take before it fails (default: the kit's, 120)")
    args = parser.parse_args(argv)

    from methods import contract
    from methods.base import MethodError

    try:
        options = json.loads(args.options)
        problem = None if isinstance(options, dict) else f"--options must be a JSON object, got {args.options!r:.200}"
        beyond = unbounded(options) if problem is None else None
    except json.JSONDecodeError as exc:
        options, problem = None, f"--options is not JSON ({exc}): {args.options!r:.200}"
    except RecursionError:
        options, problem = None, "--options is nested too deeply to read; expected an object of option values"
    if problem is None and beyond:
        problem = f"--options {beyond} is beyond the kit's bound, {OPTION_LIMIT} (it checks at small sizes)"
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return EXIT_USER_ERROR
    try:
        cls = contract.method_class(args.spec)
        total = len(contract.checks(cls, options))
        failures = contract.check_method(cls, options, seconds=args.seconds or contract.CHECK_SECONDS)
    except MethodError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USER_ERROR
    for failure in failures:
        print(failure)
    for line in contract.skipped(cls):
        print(f"check-method: not checked on this machine: {line}", file=sys.stderr)
    core_holds = not any(f.check.kind == "core" for f in failures)  # else its capabilities may not be known
    capabilities = ", ".join(sorted(cls.capabilities())) or "none" if core_holds else "unknown"
    verdict = f"{len(failures)} of {total} checks failed" if failures else f"all {total} checks passed"
    print(f"check-method {contract.label(cls, options)} (capabilities: {capabilities}): {verdict}", file=sys.stderr)
    return EXIT_FAILED if failures else 0


if __name__ == "__main__":
    sys.exit(main())
