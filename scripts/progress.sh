# progress.sh: the progress display of setup.sh, sourced by it (and by
# progress_test.sh). Each step is one numbered line with its elapsed time
# (counting live on a terminal); what its commands print goes to $LOG,
# whose last lines are shown when the step fails. The caller sets LOG,
# NOTES (a scratch file), STEP (0), STEPS and TTY (1 on a terminal).

# elapsed SECONDS: "42s" or "3m05s".
elapsed() {
	local s=$1
	if [ "$s" -lt 60 ]; then printf '%ds' "$s"; else printf '%dm%02ds' $((s / 60)) $((s % 60)); fi
}

# note TEXT: a line for the person running setup, shown after the step.
note() { echo "note: $*" | tee -a "$NOTES" >&2; }

# step TITLE COMMAND...: runs COMMAND (a function of this script) with its
# output in the log, showing the step's number, title and elapsed time;
# on failure prints the log's last lines and exits. COMMAND runs in a
# subshell: what it must tell later steps it leaves in a file.
step() {
	local title=$1
	shift
	step_begin "$title"
	("$@") >>"$LOG" 2>&1 </dev/null &
	step_end "$title" $! "$(date +%s)" ""
}

# background COMMAND...: starts COMMAND now, its output kept apart until
# `await TITLE` shows it as a step: for work that can overlap the steps
# between. One at a time.
background() {
	BG_LOG="$LOG.background"
	("$@") >"$BG_LOG" 2>&1 </dev/null &
	BG_PID=$!
	BG_START=$(date +%s)
}

# await TITLE: the step of the command background started, timed from its
# start; its output joins the log.
await() {
	step_begin "$1"
	step_end "$1" "$BG_PID" "$BG_START" "$BG_LOG"
}

step_begin() {
	STEP=$((STEP + 1))
	: >"$NOTES"
	printf '\n==> [%d/%d] %s\n' "$STEP" "$STEPS" "$1" >>"$LOG"
}

# step_end TITLE PID START OWN-LOG: shows the step until PID ends, then
# its outcome. OWN-LOG, if set, is the step's output, added to the log.
step_end() {
	local title=$1 pid=$2 start=$3 own=$4 rc=0 took
	if [ "$TTY" = 1 ]; then
		while kill -0 "$pid" 2>/dev/null; do
			printf '\r[%d/%d] %s ... %s ' "$STEP" "$STEPS" "$title" "$(elapsed $(($(date +%s) - start)))"
			sleep 1
		done
		printf '\r\033[K'
	else
		printf '[%d/%d] %s ...\n' "$STEP" "$STEPS" "$title"
	fi
	wait "$pid" || rc=$?
	if [ -n "$own" ]; then
		cat "$own" >>"$LOG"
		rm -f "$own"
	fi
	took=$(elapsed $(($(date +%s) - start)))
	if [ "$rc" -ne 0 ]; then
		printf '[%d/%d] %s: FAILED after %s (exit %d); the last lines of %s:\n' "$STEP" "$STEPS" "$title" "$took" "$rc" "$LOG"
		tail -n 25 "$LOG" | sed 's/^/    /'
		exit 1
	fi
	printf '[%d/%d] %s: done in %s\n' "$STEP" "$STEPS" "$title" "$took"
	sed 's/^/      /' "$NOTES"
}

# skip TITLE WHY: a step with nothing to do.
skip() {
	STEP=$((STEP + 1))
	printf '[%d/%d] %s: %s\n' "$STEP" "$STEPS" "$1" "$2"
}
