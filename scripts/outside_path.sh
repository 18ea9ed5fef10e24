#!/usr/bin/env bash
# The outside contributor's path, end to end, on a clean machine (issue 46; docs/SUBMITTING.md):
# from a wheel of the suite to a validated submission of an outside package's methods on the board.
#
# Usage: scripts/outside_path.sh            (PYTHON=python3.11 scripts/outside_path.sh to pick the interpreter)
#
# Everything happens in a fresh temporary folder outside the repository ($T, printed first; removed at
# the end, kept where a step failed or with KEEP_TEMP=1): the suite's wheel and examples/my-attn's
# wheel are built from the repository's committed HEAD (`git archive`, so a clean checkout), installed
# into a fresh virtual environment, and every command runs from $T/work, outside both trees, through
# the console commands a user has. my-attn is installed by name from a folder of wheels ($T/index) that
# stands in for the package index, as a release of it would be (`pip install my-attn==0.3.1`); the
# submission then declares "my-attn==0.3.1". Network: the package index alone (pip, for the suite's
# dependencies and the build backend). Nothing outside $T is written but pip's cache.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="${PYTHON:-python3}"
T="$(mktemp -d "${TMPDIR:-/tmp}/outside-path.XXXXXX")"
trap 'rc=$?; [ "$rc" -eq 0 ] || echo "FAILED (exit $rc); its folder is kept for a look: $T" >&2' EXIT
unset PYTHONPATH VIRTUAL_ENV PYTHONHOME
export SUITE_DATA_DIR="$T/data" SUITE_HYDRA_DIR="$T/hydra"  # generated data and Hydra's logs stay in $T
export PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONUNBUFFERED=1  # output in the order it is made
export TQDM_DISABLE=1  # progress bars redraw with carriage returns: noise in a log (the eval lines stay)
# pip runs with -qq below: errors only (its warnings would be about this machine's pip configuration)

n=0
step() { n=$((n + 1)); printf '\n==> %d. %s\n' "$n" "$*"; }
# Echo a command (with $T for the temporary folder), then run it.
show() { local line="$*"; printf '$ %s\n' "${line//$T/\$T}"; }
run() { show "$@"; "$@"; }
# Run a command that must be refused: echo it, show its output and exit code, fail unless it exits
# non-zero and its output holds the expected text. Keeps the output's first line in $refused.
refuse() {
  local expect="$1"; shift
  local line="$*" out rc=0
  printf '$ %s\n' "${line//$T/\$T}"
  out="$("$@" 2>&1)" || rc=$?
  printf '%s\n' "${out//$T/\$T}"
  printf '(exit %d)\n' "$rc"
  if [ "$rc" -eq 0 ] || ! grep -qF -- "$expect" <<<"$out"; then
    echo "FAILED: expected a refusal saying: $expect" >&2
    exit 1
  fi
  refused+=("$(grep -F -- "$expect" <<<"$out" | head -1)")
}
refused=()

echo "outside path, $(date -u +%Y-%m-%dT%H:%M:%SZ): repository $REPO at $(git -C "$REPO" rev-parse HEAD), temporary folder \$T=$T"
if [ -n "$(git -C "$REPO" status --porcelain --untracked-files=no)" ]; then
  echo "(the checkout has uncommitted changes: they are not in the wheel, which is built from HEAD)"
fi
echo "python: $("$PYTHON" --version 2>&1) ($(command -v "$PYTHON"))"
cd "$T"

step "Build the suite's wheel and the example package's from a clean copy of the repository's HEAD"
mkdir -p src dist index work
run git -C "$REPO" archive --format=tar -o "$T/src.tar" HEAD
run tar -xf src.tar -C src
run "$PYTHON" -m venv venv  # a fresh virtual environment: the one the wheel is built with and installed into
export PATH="$T/venv/bin:$PATH"
hash -r
run python -m pip wheel --no-deps -qq -w dist ./src  # README: pip wheel --no-deps . -w dist
run python -m pip wheel --no-deps -qq -w index ./src/examples/my-attn  # the release a contributor publishes
ls -l dist index | sed "s|$T|\$T|g"
wheel="$(ls dist/attention_suite-*.whl)"

step "Install the wheel (torch at the pyproject's cap, 2.13.0) and my-attn by name from the index folder"
run python -m pip install -qq "$wheel" "torch==2.13.0"
# by name, as from the package index (so pip writes no direct_url.json: method.distribution.source "index")
run python -m pip install -qq --no-deps --no-index --find-links ./index "my-attn==0.3.1"
show "python -m pip list | grep -iE '^(attention-suite|my-attn|torch) '"
python -m pip list 2>/dev/null | grep -iE '^(attention-suite|my-attn|torch) '

cd "$T/work"
step "From \$T/work, outside both trees: the methods and tasks found, the contract kit, smoke runs"
show "attention-suite --help | grep -A2 '^  method:'"
attention-suite --help | grep -A2 '^  method:'
run python - <<'EOF'
import methods, tasks
from suite.env import distribution_of
for name in methods.available():
    cls = methods.get(name)
    if not cls.__module__.startswith("methods."):
        dist = distribution_of(cls)
        print(f"outside method {name}: {cls.__module__}:{cls.__qualname__} from {dist['name']} {dist['version']}")
print("methods:", ", ".join(methods.available()))
print("tasks:", ", ".join(tasks.available()))
EOF
declare -A checked
for method in relu_fm topk_softmax; do
  run attention-suite check-method "$method" 2>&1
  checked[$method]=passed
done
# the README's own example method ("Your own method"), copied into my_pkg/attn.py of this folder
mkdir -p my_pkg && : > my_pkg/__init__.py
run python - "$T/src/README.md" my_pkg/attn.py <<'EOF'
import re, sys
blocks = re.findall(r"```python\n(.*?)```", open(sys.argv[1]).read(), re.S)
[block] = [b for b in blocks if b.startswith("# my_pkg/attn.py")]  # as tests/test_outside.py reads it
open(sys.argv[2], "w").write(block)
print(f"wrote {sys.argv[2]}: {len(block.splitlines())} lines")
EOF
run attention-suite check-method my_pkg.attn:SigmoidAttention 2>&1
checked[SigmoidAttention]=passed
submission="$T/work/submissions/me-cpu"  # SUBMITTING.md: the runs write straight into the submission folder
for method in relu_fm topk_softmax; do
  run attention-suite "method=$method" task=mqar budget=smoke "results_dir=$submission"
done
find submissions -name '*.json' | sort

step "The records' provenance, and the reproduce block the site gives them"
provenance() {  # the provenance fields of every record under $1
  python - "$1" <<'EOF'
import json, pathlib, sys
for path in sorted(pathlib.Path(sys.argv[1]).rglob("*.json")):
    record = json.loads(path.read_text())
    if "env" not in record:
        continue
    env, method = record["env"], record["method"]
    print(f"{path}:")
    print(f"  env.suite_version={env['suite_version']}  env.git_commit={env['git_commit']}  env.git_dirty={env['git_dirty']}")
    print(f"  method.name={method['name']}  method.import_path={method['import_path']}")
    print(f"  method.distribution={json.dumps(method['distribution'])}")
    print(f"  config.method.package={record['config']['method'].get('package')}")
EOF
}
run provenance submissions/me-cpu
run python - submissions/me-cpu <<'EOF'
import sys
from pathlib import Path
from suite.site.runs import install_lines, load_runs, reproduce_command
runs, _ = load_runs(Path(sys.argv[1]))
for run in sorted(runs, key=lambda r: r.record["method"]["name"]):
    print(f"# reproduce {run.record['method']['name']} (the run page's block):")
    print("\n".join(install_lines(run) + [reproduce_command(run)]))
EOF
version="$(python -c 'from suite.env import suite_version; print(suite_version())')"

step "Provenance check: \$T becomes an unrelated git repository (the venv inside it); a smoke run must not take its commit"
echo "a user's own project, holding the virtual environment" > "$T/notes.txt"
run git -C "$T" init -q
run git -C "$T" -c user.name="A User" -c user.email=user@example.org add notes.txt
run git -C "$T" -c user.name="A User" -c user.email=user@example.org commit -q -m "my project"
theirs="$(git -C "$T" rev-parse HEAD)"
echo "the unrelated repository's commit: $theirs"
run attention-suite method=relu_fm task=mqar budget=smoke "results_dir=$T/work/in-repo"
run provenance in-repo
if grep -rq "$theirs" in-repo; then
  echo "FAILED: a record carries the unrelated repository's commit $theirs" >&2
  exit 1
fi
echo "no record under in-repo/ names $theirs"

step "The submission: submission.json declaring my-attn==0.3.1, validated as CI validates it; bad inputs refused"
cat > submissions/me-cpu/submission.json <<EOF
{"submitter": "An Outside Contributor", "added": "$(date +%F)", "notes": "my-attn's two methods, smoke runs",
 "packages": ["my-attn==0.3.1"]}
EOF
run cat submissions/me-cpu/submission.json
# what CI runs on the pull request (.ci/validate-submissions): install the declared packages (from
# the index folder here; already installed), check-method and a smoke run of each outside method, validate
PIP_NO_INDEX=1 PIP_FIND_LINKS="$T/index" run python -m suite.submission install submissions/me-cpu
show python -m suite.submission rerun submissions/me-cpu --results "$T/work/rerun"
python -m suite.submission rerun submissions/me-cpu --results "$T/work/rerun" > rerun.log 2>&1 || { cat rerun.log; exit 1; }
grep -E '^(check-method|record:)' rerun.log | sed "s|$T|\$T|g"  # its check-method lines and the records it wrote
run attention-suite validate --submission submissions/me-cpu
# 1. a git URL without its commit
mkdir -p submissions/bad-git && cp -r submissions/me-cpu/train submissions/bad-git/
echo '{"submitter": "x", "added": "2026-01-01", "packages": ["my-attn==0.3.1", "git+https://github.com/you/my-attn@main"]}' \
  > submissions/bad-git/submission.json
refuse "is a git URL not pinned to a commit" attention-suite validate --submission submissions/bad-git
# 2. a package that the index does not have
mkdir -p submissions/bad-name
echo '{"submitter": "x", "added": "2026-01-01", "packages": ["my-attn-nowhere==9.9.9"]}' \
  > submissions/bad-name/submission.json
PIP_NO_INDEX=1 PIP_FIND_LINKS="$T/index" \
  refuse "cannot be installed" python -m suite.submission install submissions/bad-name
# 3. records of my-attn installed from a local folder (pip install ./examples/my-attn): nobody else can install that
run python -m pip install -qq --no-deps --force-reinstall "$T/src/examples/my-attn"
run attention-suite method=relu_fm task=mqar budget=smoke "results_dir=$T/work/submissions/bad-local"
cp submissions/me-cpu/submission.json submissions/bad-local/
refuse "was installed from a local folder or file" attention-suite validate --submission submissions/bad-local
run python -m pip install -qq --no-deps --force-reinstall --no-index --find-links ../index "my-attn==0.3.1"

step "The site from a (here empty) verified results folder and the submission: the outside methods' rows"
mkdir -p verified  # stands for the project's results/
run attention-suite-site --results verified --submitted submissions/me-cpu --out site
rows=0
for method in relu_fm topk_softmax; do
  # its rows: in the board's smoke section (index.html) and on the runs page with its tier (the hover's text in [])
  show "grep -h '<td>$method</td>' site/index.html site/runs.html"
  grep -h "<td>$method</td>" site/index.html site/runs.html \
    | sed -e 's/ title="\([^"]*\)">/>[\1] /' -e 's/<[^>]*>/ /g' -e 's/&#39;/'"'"'/g' -e 's/  */ /g' -e 's/^ //'
  if grep -q "<td>$method</td>" site/index.html && grep -q "<td>$method</td>" site/runs.html; then rows=$((rows + 1)); fi
done
page="$(grep -l 'my_attn.relu:ReluAttention' site/runs/*.html | head -1)"
echo "the reproduce block of $page:"
python - "$page" <<'EOF'
import html, re, sys
[block] = re.findall(r'<pre class="command">(.*?)</pre>', open(sys.argv[1]).read(), re.S)
print(html.unescape(block).strip())
EOF

commit="$(python -c 'import glob, json; print(json.dumps(json.load(open(sorted(glob.glob("submissions/me-cpu/train/**/*.json", recursive=True))[0]))["env"]["git_commit"]))')"
cd /
if [ -n "${KEEP_TEMP:-}" ]; then where="kept: \$T=$T"; else rm -rf "$T"; where="\$T removed"; fi
printf '\nSUMMARY: attention-suite %s from its wheel (git_commit %s; not the unrelated repo'"'"'s %s); check-method relu_fm %s, topk_softmax %s, README SigmoidAttention %s; validate --submission passed; %d bad inputs refused; %d/2 outside methods on the site; %s\n' \
  "$version" "$commit" "${theirs:0:12}" "${checked[relu_fm]}" "${checked[topk_softmax]}" "${checked[SigmoidAttention]}" \
  "${#refused[@]}" "$rows" "$where"
