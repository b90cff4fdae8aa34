#!/usr/bin/env bash
# The checkout is as clean after the tests as before (issue 43, 2): tests run in temporary folders and never write
# here. Run after pytest (.ci/run): fails, listing them, when `git status --porcelain --ignored=matching` shows a path
# beyond what installing leaves (.ci/actionlint/, *.egg-info/, __pycache__/).
#   ci/check_clean.sh --record FILE   writes the current paths to FILE (before pytest, on a checkout already dirty)
#   ci/check_clean.sh [FILE]          fails on a path that is neither allowed nor listed in FILE
set -euo pipefail
cd "$(dirname "$0")/.."
paths() {
    # untracked (??) and ignored (!!) paths only: changes to tracked files are someone's work, not a test's output
    git status --porcelain --ignored=matching | grep -E '^(\?\?|!!) ' | cut -c4- \
        | grep -Ev '(^|/)__pycache__/$|(^|/)[^/]*\.egg-info/$|^\.ci/actionlint/$' || true
}
if [[ "${1:-}" == "--record" ]]; then
    paths >"${2:?--record needs a file}"
    exit 0
fi
baseline=${1:-/dev/null}
new=$(paths | grep -vxF -f "$baseline" || true)
if [[ -n "$new" ]]; then
    echo "ci/check_clean.sh: the tests left these paths in the checkout (tests must write in temporary folders):" >&2
    echo "$new" | sed 's/^/  /' >&2
    exit 1
fi
echo "ci/check_clean.sh: the checkout is clean"
