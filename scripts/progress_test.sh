#!/usr/bin/env bash
# progress_test.sh: checks setup.sh's syntax and its progress display
# (scripts/progress.sh): a step shows its number, title and time and keeps
# its output in the log; a failing step shows the log's last lines and
# exits non-zero; notes reach the screen. Run by scripts/test.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
bash -n scripts/setup.sh
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
passed=0 failed=0
check() { # check NAME WANT-REGEX TEXT
	if printf '%s' "$3" | grep -Eq -- "$2"; then
		passed=$((passed + 1))
	else
		failed=$((failed + 1))
		printf 'FAIL %s: want /%s/ in:\n%s\n' "$1" "$2" "$3" >&2
	fi
}
run() { # run SCRIPT: the display's output of SCRIPT, its exit code last
	LOG=$dir/log NOTES=$dir/notes bash -c '. scripts/progress.sh; STEP=0 STEPS=3 TTY=0; '"$1"'; echo "rc=0"' 2>&1 || echo "rc=$?"
}
out=$(run 'work() { echo lots of apt output; echo more; }; step "installing things" work; skip "starting the engine" running')
check "numbered step" '^\[1/3\] installing things \.\.\.$' "$out"
check "step time" '^\[1/3\] installing things: done in [0-9]+s$' "$out"
check "skipped step" '^\[2/3\] starting the engine: running$' "$out"
check "output kept off the screen" '^0$' "$(printf '%s\n' "$out" | grep -c 'lots of apt output' || true)"
check "output in the log" 'lots of apt output' "$(cat "$dir/log")"
check "step title in the log" '==> \[1/3\] installing things' "$(cat "$dir/log")"
out=$(run 'bad() { for i in $(seq 1 40); do echo "line $i"; done; echo "E: unable to locate package nope"; exit 3; }; step "installing nope" bad; echo "not reached"')
check "failure line" '^\[1/3\] installing nope: FAILED after [0-9]+s \(exit 3\); the last lines of .*log:$' "$out"
check "failure tail" '^    E: unable to locate package nope$' "$out"
check "tail has the last lines" '^    line 40$' "$out"
check "tail only" '^0$' "$(printf '%s\n' "$out" | grep -c '^    line 1$' || true)"
check "stops at a failure" 'rc=1$' "$out"
out=$(run 'n() { note "no runsc package here"; }; step "configuring" n')
check "note shown" '^      note: no runsc package here$' "$out"
out=$(run 'slow() { sleep 1; echo built it; }; work() { echo apt; }; background slow; step "installing" work; await "building in the background"')
check "background step" '^\[2/3\] building in the background: done in [0-9]+s$' "$out"
check "background output joins the log" 'built it' "$(cat "$dir/log")"
out=$(run 'bad() { echo "go: cannot build"; exit 2; }; background bad; await "building"')
check "background failure" '^    go: cannot build$' "$out"
check "background failure stops" 'rc=1$' "$out"
check "elapsed minutes" '^3m05s$' "$(bash -c '. scripts/progress.sh; elapsed 185')"
echo "progress_test: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
