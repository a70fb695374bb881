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

step() { printf '\n==> %s\n' "$*"; }

apt_install() {
	step "installing $*"
	if [ -z "${APT_UPDATED:-}" ]; then
		$SUDO apt-get update -qq
		APT_UPDATED=1
	fi
	DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

engine_up() { $SUDO docker info >/dev/null 2>&1; }

ensure_packages() {
	local pkgs=()
	if ! engine_up && ! command -v dockerd >/dev/null; then pkgs+=(docker.io); fi
	command -v mmdebstrap >/dev/null || pkgs+=(mmdebstrap)
	[ -e /usr/share/keyrings/debian-archive-keyring.gpg ] || pkgs+=(debian-archive-keyring)
	command -v git >/dev/null || pkgs+=(git)
	command -v gcc >/dev/null || pkgs+=(gcc libc6-dev) # go test -race needs cgo
	command -v curl >/dev/null || pkgs+=(curl ca-certificates)
	if [ ${#pkgs[@]} -gt 0 ]; then apt_install "${pkgs[@]}"; fi
	# The browser tests drive a real headless Chromium. Debian packages it as
	# chromium; elsewhere (Ubuntu's is a snap) those tests skip.
	if ! command -v chromium >/dev/null; then
		apt_install chromium || echo "note: no chromium package here; the browser tests will be skipped" >&2
	fi
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
DAEMON_JSON_CHANGED=0
ensure_runsc() {
	command -v runsc >/dev/null || apt_install runsc || {
		echo "note: no runsc package here; the gvisor isolation tier will be unavailable" >&2
		return 0
	}
	command -v jq >/dev/null || apt_install jq
	local cur='{}' new
	if $SUDO test -s "$DAEMON_JSON"; then cur=$($SUDO cat "$DAEMON_JSON"); fi
	new=$(printf '%s' "$cur" | jq --arg path "$(command -v runsc)" \
		'.runtimes.runsc = {path: $path, runtimeArgs: ["--host-uds=all", "--network=none"]}')
	[ "$(printf '%s' "$cur" | jq -S .)" = "$(printf '%s' "$new" | jq -S .)" ] && return 0
	step "registering the runsc runtime in $DAEMON_JSON"
	$SUDO mkdir -p "$(dirname "$DAEMON_JSON")"
	printf '%s\n' "$new" | $SUDO tee "$DAEMON_JSON.agentbox-new" >/dev/null
	$SUDO mv "$DAEMON_JSON.agentbox-new" "$DAEMON_JSON"
	DAEMON_JSON_CHANGED=1
}

# reload_engine makes a running engine read a changed daemon.json: a
# SIGHUP reloads its runtimes without stopping any container.
reload_engine() {
	[ "$DAEMON_JSON_CHANGED" = 1 ] || return 0
	step "reloading the container engine's configuration"
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
	if engine_up; then
		reload_engine
		return 0
	fi
	step "starting the container engine"
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

ensure_go() {
	go_ok && return 0
	apt_install golang-go || true
	go_ok && return 0
	step "installing Go from go.dev"
	local v
	v=$(curl -fsSL 'https://go.dev/VERSION?m=text' | head -1)
	curl -fsSL "https://go.dev/dl/${v}.linux-$(dpkg --print-architecture).tar.gz" | $SUDO tar -C /usr/local -xz
	go_ok || { echo "Go installation failed" >&2; exit 1; }
}

# A sandbox can hold a file open per ~400 bytes of its memory (by mapping
# files and closing them), past its open-files limit, so the host's file
# table must not be the smaller bound: raise fs.file-max to what systemd
# sets at boot (the limit is then memory, charged to each sandbox).
raise_file_max() {
	local want=9223372036854775807
	[ "$(cat /proc/sys/fs/file-max 2>/dev/null || echo "$want")" = "$want" ] && return 0
	step "raising fs.file-max (/etc/sysctl.d/60-agentbox.conf)"
	echo "fs.file-max = $want" | $SUDO tee /etc/sysctl.d/60-agentbox.conf >/dev/null
	$SUDO sysctl -q -w fs.file-max="$want" || echo "note: could not raise fs.file-max; agentbox raises it itself when run as root" >&2
}

ensure_packages
ensure_runsc
start_engine
ensure_go
raise_file_max

step "building bin/agentbox"
CGO_ENABLED=0 go build -trimpath -o bin/agentbox ./cmd/agentbox

step "building the sandbox image (skipped when current)"
$SUDO bin/agentbox image build

[ "$RUN_DEMO" = 1 ] || exit 0

# Run agentbox as this user when the engine lets us, so the server's data dir
# (and its API token) is this user's.
AB_SUDO="$SUDO"
docker info >/dev/null 2>&1 && AB_SUDO=""

step "running a command in a fresh sandbox"
$AB_SUDO bin/agentbox exec 'echo "Hello from $(hostname) as $(id -un) (uid $(id -u)) in $(pwd)"; python3 --version; node --version; echo "network interfaces: $(ls /sys/class/net | tr "\n" " ")"'

step "starting the server on http://127.0.0.1:8080 (Ctrl-C stops it)"
echo "In another terminal (with a model configured, see README \"Choosing a model\"):"
echo "  bin/agentbox submit --follow 'Create hello.py that prints Hello, World! and run it'"
exec $AB_SUDO bin/agentbox serve
