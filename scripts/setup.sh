#!/usr/bin/env bash
# setup.sh: from a fresh Debian or Ubuntu machine to a command running in an
# agentbox sandbox. Installs a container engine and mmdebstrap if missing,
# starts the engine, installs Go if missing, builds bin/agentbox and the
# sandbox image (registry-free, from Debian's archive), then runs a command in
# a fresh sandbox. Safe to run again: every step skips what is already done.
#
# Finally it starts the server (`agentbox serve`) in the foreground.
#
#   ./scripts/setup.sh            everything, ending with the server running (Ctrl-C stops it)
#   ./scripts/setup.sh --no-run   everything but the demo and the server (what CI uses)
set -euo pipefail
cd "$(dirname "$0")/.."

RUN_DEMO=1
[ "${1:-}" = "--no-run" ] && RUN_DEMO=0
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export PATH="$PATH:/usr/local/go/bin:$HOME/go/bin"
GO_MIN_MINOR=21 # go 1.21+ fetches the toolchain go.mod names by itself

# Progress: each step is one numbered line with its elapsed time; what the
# commands print goes to the log file, whose last lines are shown when a
# step fails. The log's path is printed first.
LOG=$(mktemp "${TMPDIR:-/tmp}/agentbox-setup.XXXXXX.log")
NOTES=$(mktemp "${TMPDIR:-/tmp}/agentbox-setup.XXXXXX.notes")
trap 'rm -f "$NOTES"' EXIT
STEP=0
STEPS=7 # the last is the demo, or with --no-run the desktop layer
SETUP_START=$(date +%s)
TTY=0
[ -t 1 ] && TTY=1

# shellcheck source=scripts/progress.sh
. scripts/progress.sh

apt_install() {
	echo "apt-get install $*"
	$SUDO apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "$@"
}

engine_up() { $SUDO docker info >/dev/null 2>&1; }

# go_candidate_ok: Debian's golang-go is new enough to install (bookworm's
# 1.19 is not: then Go comes from go.dev, without installing it first).
go_candidate_ok() {
	local v minor
	v=$(apt-cache policy golang-go 2>/dev/null | sed -n 's/^ *Candidate: *//p')
	minor=$(printf '%s' "$v" | sed -nE 's/^([0-9]+:)?1\.([0-9]+).*/\2/p')
	[ -n "$minor" ] && [ "$minor" -ge "$GO_MIN_MINOR" ]
}

# wanted_packages prints the Debian packages this host lacks, for one apt
# transaction: the engine, mmdebstrap, git, a C compiler (go test -race
# needs cgo), curl, runsc (the gvisor tier) and jq (to register it), and
# Go when Debian's is new enough.
wanted_packages() {
	local pkgs=()
	if ! engine_up && ! command -v dockerd >/dev/null; then pkgs+=(docker.io); fi
	command -v mmdebstrap >/dev/null || pkgs+=(mmdebstrap)
	[ -e /usr/share/keyrings/debian-archive-keyring.gpg ] || pkgs+=(debian-archive-keyring)
	command -v git >/dev/null || pkgs+=(git)
	command -v gcc >/dev/null || pkgs+=(gcc libc6-dev)
	command -v curl >/dev/null || pkgs+=(curl ca-certificates)
	command -v jq >/dev/null || pkgs+=(jq)
	if ! command -v runsc >/dev/null && apt-cache show runsc >/dev/null 2>&1; then pkgs+=(runsc); fi
	if ! go_ok && go_candidate_ok; then pkgs+=(golang-go); fi
	echo "${pkgs[@]}"
}

install_packages() {
	# shellcheck disable=SC2046 # one word per package
	apt_install $(wanted_packages)
	command -v runsc >/dev/null || note "no runsc package here; the gvisor isolation tier will be unavailable"
}
# The gvisor isolation tier is Docker with gVisor's runsc runtime. Debian
# packages runsc; it is registered in /etc/docker/daemon.json, merged with
# jq into whatever the file already holds. --host-uds=all lets the guest's
# unix socket in its bind-mounted directory answer the host; --network=none
# gives each sandbox only its own loopback, whatever network the engine
# would attach (gvisor sandboxes have no network). --oci-seccomp stays off:
# this runsc's filter ignores a rule's errnoRet, so clone3 would fail with
# EPERM rather than ENOSYS and no thread could start (docs/security.md,
# "Isolation tiers"). The engine is
# reloaded only when the file changed and the engine already runs (a fresh
# machine writes the file before dockerd starts).
DAEMON_JSON=/etc/docker/daemon.json
daemon_json() {
	local cur='{}'
	if $SUDO test -s "$DAEMON_JSON"; then cur=$($SUDO cat "$DAEMON_JSON"); fi
	printf '%s' "$cur"
}

# daemon_json_wanted prints daemon.json with runsc registered.
daemon_json_wanted() {
	daemon_json | jq --arg path "$(command -v runsc)" \
		'.runtimes.runsc = {path: $path, runtimeArgs: ["--host-uds=all", "--network=none"]}'
}

# runsc_registered: no runsc here, or daemon.json registers it as wanted.
runsc_registered() {
	command -v runsc >/dev/null || return 0
	command -v jq >/dev/null || return 1
	[ "$(daemon_json | jq -S .)" = "$(daemon_json_wanted | jq -S .)" ]
}

register_runsc() {
	local new
	new=$(daemon_json_wanted)
	echo "registering the runsc runtime in $DAEMON_JSON"
	$SUDO mkdir -p "$(dirname "$DAEMON_JSON")"
	printf '%s\n' "$new" | $SUDO tee "$DAEMON_JSON.agentbox-new" >/dev/null
	$SUDO mv "$DAEMON_JSON.agentbox-new" "$DAEMON_JSON"
	engine_up && reload_engine
	return 0
}

# reload_engine makes a running engine read a changed daemon.json: a
# SIGHUP reloads its runtimes without stopping any container.
reload_engine() {
	echo "reloading the container engine's configuration"
	if [ -d /run/systemd/system ]; then
		$SUDO systemctl reload docker
	else
		$SUDO kill -HUP "$(pidof dockerd)"
	fi
	for _ in $(seq 1 60); do
		$SUDO docker info --format '{{json .Runtimes}}' 2>/dev/null | grep -q '"runsc"' && return 0
		sleep 0.5
	done
	echo "the engine did not pick up the runsc runtime; see $DAEMON_JSON" >&2
	exit 1
}

start_engine() {
	if [ -d /run/systemd/system ]; then
		$SUDO systemctl start docker
	else
		$SUDO sh -c 'nohup setsid dockerd >/var/log/dockerd.log 2>&1 &'
	fi
	for _ in $(seq 1 120); do
		engine_up && return 0
		sleep 0.5
	done
	echo "the engine did not start; see /var/log/dockerd.log or: journalctl -u docker" >&2
	exit 1
}

go_ok() {
	command -v go >/dev/null || return 1
	local minor
	minor=$(go env GOVERSION | sed -E 's/^go1\.([0-9]+).*/\1/')
	[ "${minor:-0}" -ge "$GO_MIN_MINOR" ]
}

install_go() {
	echo "installing Go from go.dev"
	local v
	v=$(curl -fsSL 'https://go.dev/VERSION?m=text' | head -1)
	curl -fsSL "https://go.dev/dl/${v}.linux-$(dpkg --print-architecture).tar.gz" | $SUDO tar -C /usr/local -xz
	go_ok || { echo "Go installation failed" >&2; exit 1; }
}

# A sandbox can hold a file open per ~400 bytes of its memory (by mapping
# files and closing them), past its open-files limit, so the host's file
# table must not be the smaller bound: raise fs.file-max to what systemd
# sets at boot (the limit is then memory, charged to each sandbox).
FILE_MAX=9223372036854775807
file_max_raised() { [ "$(cat /proc/sys/fs/file-max 2>/dev/null || echo "$FILE_MAX")" = "$FILE_MAX" ]; }

raise_file_max() {
	echo "fs.file-max = $FILE_MAX" | $SUDO tee /etc/sysctl.d/60-agentbox.conf >/dev/null
	$SUDO sysctl -q -w fs.file-max="$FILE_MAX" || note "could not raise fs.file-max; agentbox raises it itself when run as root"
}

# configure_host registers runsc with the engine (reloading a running one)
# and raises fs.file-max.
configure_host() {
	runsc_registered || register_runsc
	file_max_raised || raise_file_max
}

build_agentbox() { CGO_ENABLED=0 go build -trimpath -o bin/agentbox ./cmd/agentbox; }

echo "agentbox setup: the full log is $LOG"

pkgs=$(wanted_packages)
# Go first when it needs no apt (it is here, or curl fetches it from
# go.dev): bin/agentbox, minutes of compiling on two cores, then builds
# while apt installs the rest.
GO_FIRST=0
if go_ok; then
	skip "installing Go" "$(go env GOVERSION)"
	GO_FIRST=1
elif command -v curl >/dev/null && ! go_candidate_ok; then
	step "installing Go from go.dev" install_go
	GO_FIRST=1
fi
[ "$GO_FIRST" = 0 ] || background build_agentbox
if [ -n "$pkgs" ]; then step "installing $pkgs" install_packages; else skip "installing packages" "all there"; fi
if runsc_registered && file_max_raised; then skip "configuring the host" "done before"; else step "configuring the host (runsc runtime, fs.file-max)" configure_host; fi
if engine_up; then skip "starting the container engine" "running"; else step "starting the container engine" start_engine; fi
if [ "$GO_FIRST" = 1 ]; then
	await "building bin/agentbox (since step 1)"
else
	if go_ok; then skip "installing Go" "$(go env GOVERSION)"; else step "installing Go" install_go; fi
	step "building bin/agentbox" build_agentbox
fi
# The core first: a sandbox works as soon as it is built. The desktop and
# notebook layer (the computer and python tools) goes on top of it.
step "building the core sandbox image (Debian, Python, Node.js, git, build tools)" $SUDO bin/agentbox image build --layer core

if [ "$RUN_DEMO" = 0 ]; then
	step "building the desktop and notebook layer (Xvfb, noVNC, Jupyter)" $SUDO bin/agentbox image build --layer desktop
	echo "setup done in $(elapsed $(($(date +%s) - SETUP_START)))"
	exit 0
fi

# Run agentbox as this user when the engine lets us, so the server's data dir
# (and its API token) is this user's.
AB_SUDO="$SUDO"
docker info >/dev/null 2>&1 && AB_SUDO=""

STEP=$((STEP + 1))
printf '[%d/%d] running a command in a fresh sandbox\n' "$STEP" "$STEPS"
$AB_SUDO bin/agentbox exec 'echo "Hello from $(hostname) as $(id -un) (uid $(id -u)) in $(pwd)"; python3 --version; node --version; echo "network interfaces: $(ls /sys/class/net | tr "\n" " ")"'
echo "a working sandbox after $(elapsed $(($(date +%s) - SETUP_START)))"

echo
echo "==> starting the server on http://127.0.0.1:8080 (Ctrl-C stops it)"
if ! $AB_SUDO bin/agentbox image inspect >/dev/null 2>&1; then
	echo "It builds the desktop and notebook layer in the background first (a few minutes; its log is"
	echo "image-build.log in the server's data dir): jobs with the computer and python tools wait for it."
fi
echo "In another terminal (with a model configured, see README \"Choosing a model\"):"
echo "  bin/agentbox submit --follow 'Create hello.py that prints Hello, World! and run it'"
exec $AB_SUDO bin/agentbox serve
