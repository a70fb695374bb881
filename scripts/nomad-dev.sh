#!/usr/bin/env bash
# nomad-dev.sh: the cluster of deploy/nomad/ on one machine, on a real
# `nomad agent -dev`: PostgreSQL (the postgres job), two API replicas and a
# worker (the system job, shell agent), a job submitted through one replica
# and followed to completion through the other, then everything torn down.
# Exits 0 on success; on failure prints the logs and exits non-zero.
#
# Needs: root (raw_exec tasks run as the agent's user; the worker makes
# sandboxes), a container engine with the sandbox image (./scripts/setup.sh
# --no-run), Debian's postgresql, Go, curl and jq. Nomad is taken from PATH,
# else from /var/cache/agentbox/nomad/<version>/, else built there
# (scripts/lib/nomad.sh).
#
# Everything lives in one state directory (AGENTBOX_NOMAD_DEV_DIR, default
# /tmp/agentbox-nomad-dev); a run first stops whatever a killed run left
# there, and a trap tears down on any exit. The agent listens on 127.0.0.1
# only, on ports NOMAD_DEV_PORT..+2 (default 4656..4658).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
export PATH="$PATH:/usr/local/go/bin"
# shellcheck source=lib/nomad.sh
source scripts/lib/nomad.sh

STATE="${AGENTBOX_NOMAD_DEV_DIR:-/tmp/agentbox-nomad-dev}"
PORT="${NOMAD_DEV_PORT:-4656}"
INSTANCE=nomad-dev
TIMEOUT="${NOMAD_DEV_TIMEOUT:-180}" # seconds each wait may take
export NOMAD_ADDR="http://127.0.0.1:$PORT"
unset NOMAD_TOKEN NOMAD_NAMESPACE NOMAD_REGION
JOBS=(agentbox-api agentbox-worker agentbox-postgres)
NOMAD=""
T0=$(date +%s)

step() { printf '==> [%3ds] %s\n' "$(($(date +%s) - T0))" "$*"; }
fail() {
	echo "nomad-dev: $*" >&2
	exit 1
}

# quiet COMMAND...: runs COMMAND, printing its output only if it fails.
quiet() {
	local out
	out=$("$@" 2>&1) || {
		echo "$out" >&2
		fail "failed: $*"
	}
}

# await DESCRIPTION COMMAND...: runs COMMAND until it succeeds, for at most
# $TIMEOUT seconds.
await() {
	local what="$1" deadline=$(($(date +%s) + TIMEOUT))
	shift
	until "$@" >/dev/null 2>&1; do
		[ "$(date +%s)" -lt "$deadline" ] || fail "timed out after ${TIMEOUT}s waiting for $what"
		sleep 0.5
	done
}

# state_pids prints the processes whose command line names the state dir:
# the agent, its task executors, the tasks (never this script).
state_pids() {
	local p
	for p in /proc/[0-9]*; do
		p=${p#/proc/}
		[ "$p" != "$$" ] && [ "$p" != "$BASHPID" ] || continue
		tr '\0' ' ' 2>/dev/null <"/proc/$p/cmdline" | grep -qF "$STATE/" && echo "$p"
	done
	return 0
}

# stop_pids SIGNAL SECONDS PID...: signals the processes and waits for them
# to exit; returns 1 if some are left.
stop_pids() {
	local sig="$1" secs="$2" p left
	shift 2
	[ $# -gt 0 ] || return 0
	kill "-$sig" "$@" 2>/dev/null || true
	for _ in $(seq $((secs * 10))); do
		left=""
		for p in "$@"; do [ -d "/proc/$p" ] && left=1; done
		[ -n "$left" ] || return 0
		sleep 0.1
	done
	return 1
}

# teardown stops the jobs (purged), the agent, any process and sandbox left
# behind, and removes the state dir. Safe on a half-started or killed run.
teardown() {
	local agent pids
	if [ -n "$NOMAD" ] && curl -fsS "$NOMAD_ADDR/v1/agent/self" >/dev/null 2>&1; then
		step "stopping and purging the nomad jobs"
		for j in "${JOBS[@]}"; do
			timeout 60 "$NOMAD" job stop -purge -yes "$j" >/dev/null 2>&1 || true
		done
		# The allocations' tasks end before the agent does.
		for _ in $(seq 600); do
			[ -z "$(state_pids | grep -vxF "$(cat "$STATE/nomad.pid" 2>/dev/null)")" ] && break
			sleep 0.1
		done
		timeout 30 "$NOMAD" system gc >/dev/null 2>&1 || true
	fi
	agent=$(cat "$STATE/nomad.pid" 2>/dev/null || true)
	if [ -n "$agent" ] && [ -d "/proc/$agent" ]; then
		step "stopping the nomad agent"
		stop_pids INT 30 "$agent" || stop_pids KILL 5 "$agent" || true
	fi
	# What a killed agent leaves running: executors, tasks, postgres.
	if [ -d "$STATE/pg/data" ]; then
		runuser -u postgres -- "$(pg_bin pg_ctl)" -D "$STATE/pg/data" -m immediate -w -t 30 stop >/dev/null 2>&1 || true
	fi
	# shellcheck disable=SC2046
	pids=$(state_pids)
	if [ -n "$pids" ]; then
		# shellcheck disable=SC2086
		stop_pids TERM 30 $pids || stop_pids KILL 5 $pids || true
	fi
	docker ps -aq --filter "label=io.agentbox.instance=$INSTANCE" | xargs -r docker rm -f >/dev/null 2>&1 || true
	# Workspaces may be mounted loop disks under the worker's data dir.
	findmnt -rn -o TARGET | grep -F "$STATE/" | sort -r | xargs -r -n1 umount -l 2>/dev/null || true
	rm -rf "$STATE"
}

pg_bin() {
	local d
	d=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
	[ -n "$d" ] && echo "$d/$1" || command -v "$1"
}

# dump_logs prints what each allocation, the agent and postgres said.
dump_logs() {
	local j a
	echo "---- nomad-dev failed: logs ----" >&2
	for j in "${JOBS[@]}"; do
		for a in $("$NOMAD" job allocs -json "$j" 2>/dev/null | jq -r '.[].ID' 2>/dev/null); do
			echo "---- $j allocation $a ----" >&2
			"$NOMAD" alloc status "$a" 2>&1 | tail -n 15 >&2 || true
			"$NOMAD" alloc logs -stderr "$a" 2>&1 | tail -n 40 >&2 || true
			"$NOMAD" alloc logs "$a" 2>&1 | tail -n 20 >&2 || true
		done
	done
	echo "---- nomad agent ----" >&2
	tail -n 40 "$STATE/nomad.log" >&2 2>/dev/null || true
}

on_exit() {
	local status=$?
	trap - EXIT INT TERM
	[ "$status" -eq 0 ] || [ -z "$NOMAD" ] || dump_logs || true
	teardown || true
	if [ "$status" -eq 0 ]; then
		local left
		left=$(docker ps -aq --filter "label=io.agentbox.instance=$INSTANCE")
		[ -z "$left" ] || {
			echo "nomad-dev: sandboxes left after teardown: $left" >&2
			status=1
		}
		[ -z "$(state_pids)" ] || {
			echo "nomad-dev: processes left after teardown: $(state_pids)" >&2
			status=1
		}
	fi
	step "done, exit $status"
	exit "$status"
}

# One run at a time on a machine: the ports and the state dir are fixed.
exec 8>"${STATE%/}.lock"
flock -n 8 || fail "another nomad-dev.sh runs (lock ${STATE%/}.lock)"

[ "$(id -u)" -eq 0 ] || fail "run as root: the dev agent's raw_exec tasks run sandboxes and postgres"
for c in docker curl jq setpriv runuser; do command -v "$c" >/dev/null || fail "$c is missing"; done
[ -x "$(pg_bin initdb)" ] || fail "Debian's postgresql is missing (apt-get install postgresql)"

trap on_exit EXIT
trap 'exit 130' INT TERM

step "cleaning what an earlier run left in $STATE"
NOMAD=$(ensure_nomad) # before teardown: it stops stale jobs through the agent
teardown
mkdir -p "$STATE"
chmod 0755 "$STATE"

step "building bin/agentbox; nomad: $NOMAD ($("$NOMAD" version | head -n 1))"
make build >/dev/null
IMAGE="${AGENTBOX_IMAGE:-agentbox-sandbox:latest}"
docker image inspect "$IMAGE" >/dev/null 2>&1 || fail "no sandbox image $IMAGE (./scripts/setup.sh --no-run)"

step "starting nomad agent -dev on 127.0.0.1:$PORT"
cat >"$STATE/agent.hcl" <<EOF
data_dir  = "$STATE/nomad"
bind_addr = "127.0.0.1"
ports {
  http = $PORT
  rpc  = $((PORT + 1))
  serf = $((PORT + 2))
}
plugin "raw_exec" {
  config {
    enabled = true
  }
}
EOF
# AWS_CA_BUNDLE, when set for other tools, breaks the agent's cloud
# fingerprinting; the agent needs none of the caller's Nomad settings.
# 8>&-: the agent and its tasks must not hold the run lock.
env -u AWS_CA_BUNDLE "$NOMAD" agent -dev -config "$STATE/agent.hcl" >"$STATE/nomad.log" 2>&1 8>&- &
echo $! >"$STATE/nomad.pid"
node_ready() {
	curl -fsS "$NOMAD_ADDR/v1/nodes" | jq -e '.[] | select(.Status == "ready" and .Drivers.raw_exec.Healthy and .Drivers.docker.Healthy)' >/dev/null
}
await "a ready nomad node with raw_exec and docker" node_ready
NODE=$(curl -fsS "$NOMAD_ADDR/v1/nodes" | jq -r '.[0].Name')

step "postgres job (Debian's server as the postgres user, data in $STATE/pg)"
PGPORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
quiet "$NOMAD" job run -detach -var "node_name=$NODE" -var "data_dir=$STATE/pg" -var "port=$PGPORT" \
	deploy/nomad/postgres.nomad.hcl
await "postgres on port $PGPORT" "$(pg_bin pg_isready)" -h 127.0.0.1 -p "$PGPORT" -d agentbox -U postgres
STORE="postgres://postgres@127.0.0.1:$PGPORT/agentbox?sslmode=disable"

step "secrets into nomad variables"
TOKEN=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
SECRET=$(head -c 32 /dev/urandom | base64)
VIEWER_KEY=$(head -c 32 /dev/urandom | base64)
quiet "$NOMAD" var put -force nomad/jobs/agentbox-api AGENTBOX_STORE="$STORE" AGENTBOX_TOKEN="$TOKEN" \
	AGENTBOX_CLUSTER_SECRET="$SECRET" AGENTBOX_VIEWER_KEY="$VIEWER_KEY"
quiet "$NOMAD" var put -force nomad/jobs/agentbox-worker AGENTBOX_STORE="$STORE" \
	AGENTBOX_CLUSTER_SECRET="$SECRET"

step "worker (system job, shell agent) and two API replicas"
quiet "$NOMAD" job run -detach -var "agentbox_bin=$ROOT/bin/agentbox" -var "data_dir=$STATE/w" \
	-var agent=shell -var "instance=$INSTANCE" -var "image=$IMAGE" deploy/nomad/agentbox-worker.nomad.hcl
quiet "$NOMAD" job run -detach -var "agentbox_bin=$ROOT/bin/agentbox" -var count=2 \
	deploy/nomad/agentbox-api.nomad.hcl

api_urls() {
	curl -fsS "$NOMAD_ADDR/v1/service/agentbox-api" | jq -r '.[] | "http://\(.Address):\(.Port)"' | sort
}
apis_healthy() {
	local urls u
	urls=$(api_urls)
	[ "$(echo "$urls" | grep -c http)" -eq 2 ] || return 1
	for u in $urls; do curl -fsS "$u/healthz" >/dev/null || return 1; done
}
await "two API replicas answering /healthz" apis_healthy
read -r API_A API_B <<<"$(api_urls | tr '\n' ' ')"
step "API replicas: $API_A $API_B"

worker_alive() {
	curl -fsS -H "Authorization: Bearer $TOKEN" "$API_B/v1/workers" |
		jq -e '.workers[] | select(.alive and .address != "")' >/dev/null
}
await "an alive worker in GET /v1/workers" worker_alive
curl -fsS -H "Authorization: Bearer $TOKEN" "$API_A/v1/workers" | jq -c '.workers[] | {worker_id, address, capacity, alive}'

step "submitting a job through $API_A, following it through $API_B"
JOB=$(bin/agentbox submit --url "$API_A" --token "$TOKEN" 'echo hello from nomad')
echo "job $JOB"
OUT=$(timeout "$TIMEOUT" bin/agentbox logs "$JOB" --url "$API_B" --token "$TOKEN") || {
	echo "$OUT"
	fail "job $JOB did not complete"
}
echo "$OUT" | tail -n 5
grep -q "hello from nomad" <<<"$OUT" || fail "the job's log lacks its output"
STATUS=$(bin/agentbox status "$JOB" --json --url "$API_A" --token "$TOKEN")
jq -e '.status == "complete"' <<<"$STATUS" >/dev/null || fail "job $JOB: $STATUS"
step "job $JOB complete"
