# nomad.sh: sourced by scripts that need a Nomad binary. ensure_nomad prints
# the path of a `nomad` executable: the one on PATH, else the cached build in
# $NOMAD_CACHE/<version>/nomad (shared by every run and CI job on this
# machine), else it builds Nomad from the Go module proxy into that cache
# (~3.5 min, ~3.2 GB peak memory, a 131 MiB binary on a 2-core machine).

NOMAD_VERSION="${NOMAD_VERSION:-1.10.5}"
NOMAD_CACHE="${NOMAD_CACHE:-/var/cache/agentbox/nomad}"
# Nomad v1.10.5's go.mod requires its api module at a version the proxy does
# not serve under that name; this pseudo-version is the matching commit.
NOMAD_API_VERSION="${NOMAD_API_VERSION:-v0.0.0-20250909143645-a3b86c697f38}"

ensure_nomad() {
	local found cached
	if found=$(command -v nomad 2>/dev/null); then
		echo "$found"
		return 0
	fi
	cached="$NOMAD_CACHE/$NOMAD_VERSION/nomad"
	if [ -x "$cached" ]; then
		echo "$cached"
		return 0
	fi
	build_nomad "$cached" >&2 || return 1
	echo "$cached"
}

# build_nomad builds Nomad $NOMAD_VERSION into $1 in a throwaway module. The
# binary is written next to $1 and renamed into place, so a killed build
# never leaves a half-written binary in the cache; a lock keeps two runs on
# the same machine from building at once.
build_nomad() {
	local dest="$1" dir tmp status
	command -v go >/dev/null || PATH="$PATH:/usr/local/go/bin"
	mkdir -p "$(dirname "$dest")"
	exec 9>"$(dirname "$dest")/.build.lock"
	flock 9
	if [ -x "$dest" ]; then exec 9>&-; return 0; fi
	echo "building nomad v$NOMAD_VERSION from the Go module proxy (a few minutes)" >&2
	dir=$(mktemp -d)
	tmp="$dest.tmp.$$"
	(
		set -e
		cd "$dir"
		export GOFLAGS=-mod=mod CGO_ENABLED="${CGO_ENABLED:-1}"
		# Nomad's linker step peaks near 3.2 GB; with little memory, compile
		# one package at a time.
		local avail_kb
		avail_kb=$(awk '/MemAvailable/ {print $2}' /proc/meminfo)
		[ "${avail_kb:-0}" -ge 4000000 ] || export GOFLAGS="$GOFLAGS -p=1"
		go mod init nomadbuild >/dev/null 2>&1
		go get "github.com/hashicorp/nomad@v$NOMAD_VERSION"
		go get "github.com/hashicorp/nomad/api@$NOMAD_API_VERSION"
		go build -trimpath -o "$tmp" github.com/hashicorp/nomad
	)
	status=$?
	rm -rf "$dir"
	if [ "$status" -eq 0 ]; then
		mv -f "$tmp" "$dest"
	else
		rm -f "$tmp"
	fi
	exec 9>&-
	return "$status"
}
