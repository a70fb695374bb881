#!/usr/bin/env bash
# test.sh: the whole test suite: formatting, go vet, and every test with the
# race detector. Tests that need Docker run when an engine answers (after
# ./scripts/setup.sh); without one they skip with a reason, unless CI=true or
# AGENTBOX_REQUIRE_DOCKER=1, where they fail.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin:$HOME/go/bin"

unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then
	echo "gofmt would change:" >&2
	echo "$unformatted" >&2
	exit 1
fi
if ! docker info >/dev/null 2>&1; then
	echo "note: no container engine answers for $(id -un); Docker tests will skip (run ./scripts/setup.sh, then this as root or as a member of the docker group)" >&2
fi
./scripts/progress_test.sh
go vet ./...
# The tests that are not about isolation run on the fake driver: prove they
# need no container engine (with DOCKER_HOST pointing nowhere, a test among
# them that wants Docker fails here instead of skipping).
on_fake_driver='^(TestTaskRunsToCompletion|TestFailingTaskEndsInError|TestCancelStopsRunningJob|TestCancelPendingJob|TestTimeout|TestWatchdogEndsJobWhoseSandboxDied|TestRecoveryRequeuesAndReaps|TestPeriodicReapLeavesRunningJobsAlone|TestEngineOutageHandsJobsBack|TestFinalWriteIsRetried|TestShutdownReleasesRunningJobs|TestRecoveryAfterKill9|TestGuestOfRunningJob|TestGuestStates|TestEndedDiffIsKeptUntilTheJobRunsAgain|TestDiffUnderTheFloor|TestDiffOverItsBound|TestEndedPatchIsKept|TestCloneFailureEndsTheJobInError|TestSnapshotJobDiff|TestRestartDoesNotCloneAgain|TestNotePendingWakesIdleScheduler|TestNothingPushedWhenTheTurnFails|TestFailedHandBackLeavesTheJobComplete|TestSlowPush|TestTurnsRunInNewSandboxesOnTheWorkspace)$'
# With -race, as below, so that the test binaries built here are the ones
# the whole run uses (the build cache), not built twice.
DOCKER_HOST=unix:///nonexistent AGENTBOX_REQUIRE_DOCKER=1 go test -race -count=1 ./internal/sandbox/fake ./internal/chat
DOCKER_HOST=unix:///nonexistent AGENTBOX_REQUIRE_DOCKER=1 go test -race -count=1 -run "$on_fake_driver" ./internal/jobs
# Three packages at a time, not GOMAXPROCS's two: most of the suite waits on
# sandboxes, VMs and servers rather than computing, and with two slots
# cmd/agentbox held one for ten minutes while every other package queued for
# the second.
t0=$(date +%s)
go test -race -count=1 -p 3 -timeout 25m ./...
echo "go test took $(( $(date +%s) - t0 ))s"
