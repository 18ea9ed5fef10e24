"""``python -m suite.site [--results results] [--submitted FOLDER ...] [--out site/_build] [--serve] [--port 8000]``.

Builds the static leaderboard from the records under ``--results`` (the project's own: verified)
and under each ``--submitted`` folder (anyone else's: submitted, docs/SUBMITTING.md). Files that are not valid
records are skipped with a warning naming them. A results folder with no records gives an empty
board (with a note saying so); a results folder that does not exist is an error (exit code 2),
since it is most likely a typo.
"""

from __future__ import annotations

import argparse
import functools
import http.server
import sys
from pathlib import Path

from suite.interrupt import sigterm_as_interrupt
from suite.site.build import SiteError, build_site

EXIT_USER_ERROR = 2
EXIT_INTERRUPTED = 130


def serve(out_dir: Path, port: int) -> None:
    """Serve the build on localhost until Ctrl-C."""
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(out_dir))
    with http.server.ThreadingHTTPServer(("127.0.0.1", port), handler) as server:
        print(f"serving {out_dir} at http://127.0.0.1:{server.server_address[1]}/ (Ctrl-C stops)", flush=True)
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m suite.site", description=__doc__.split("\n\n")[1])
    parser.add_argument("--results", type=Path, action="append", default=[],
                        help="the folder of verified records (default: results); once")
    parser.add_argument("--submitted", type=Path, action="append", default=[], metavar="FOLDER",
                        help="a submission folder (docs/SUBMITTING.md), its records marked submitted; repeatable")
    parser.add_argument("--out", type=Path, default=Path("site/_build"), help="output folder (default: site/_build)")
    parser.add_argument("--serve", action="store_true", help="serve the build on localhost after building")
    parser.add_argument("--port", type=int, default=8000, help="port for --serve (0: any free port)")
    args = parser.parse_args(argv)
    if len(args.results) > 1:  # argparse would keep the last alone, and build a board of part of them in silence
        given = ", ".join(map(str, args.results))
        print(f"error: --results given {len(args.results)} times ({given}); give one folder of verified records, "
              "and each other folder of records as --submitted", file=sys.stderr)
        return EXIT_USER_ERROR
    args.results = args.results[0] if args.results else Path("results")
    try:
        with sigterm_as_interrupt():
            report = build_site(args.results, args.out, submitted=tuple(args.submitted))
    except SiteError as exc:
        for problem in exc.problems:
            print(f"warning: {problem}", file=sys.stderr)
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USER_ERROR
    except KeyboardInterrupt:
        print(f"interrupted: the site in {str(args.out)!r} is left as it was", file=sys.stderr)
        return EXIT_INTERRUPTED
    for problem in report.problems:
        print(f"warning: {problem}", file=sys.stderr)
    if report.runs == 0:
        print(f"warning: no records under {args.results}; the board is empty", file=sys.stderr)
    print(f"site: {report.out_dir / 'index.html'} ({report.runs} records, {len(report.problems)} skipped)")
    if args.serve:
        serve(args.out, args.port)
    return 0


if __name__ == "__main__":
    sys.exit(main())
