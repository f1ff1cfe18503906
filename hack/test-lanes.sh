#!/usr/bin/env bash
# Runs the go test invocations of `make test` in three lanes at once, prints
# the first lane as it runs and the others once they end, says how long
# each lane took, and fails if any step of any lane failed. The lanes:
#
#   main     the newest minor's pass but the suites that mostly wait
#   waiting  the newest minor's suites that mostly wait, three at a time,
#            then the controller-runtime module
#   older    the older minor's pass, three at a time, then the module
#
# The Makefile's test target calls it with what it computes in the
# environment: GO, TEST_FLAGS, OLDER_MINOR, CR_MODULE, and the package
# lists MAIN_PKGS, WAITING_PKGS and OLDER_PKGS (see the Makefile for what
# goes in which, and why).
#
# Why lanes: on 2 cores, one go test -p 2 over everything leaves a core
# idle for minutes while suites that mostly wait (lease expiries, rollout
# deadlines, an example binary's restarts) run two at a time, and the
# older minor's pass after the newest's leaves one idle again. Measured
# on 2 idle cores (CONTRIBUTING.md): 1,164 to 1,222 s for vet and the
# tests one pass after the other, 955 s in these lanes.
set -uo pipefail

: "${GO:=go}" "${TEST_FLAGS:=-race -count=1}" "${OLDER_MINOR:?}" "${CR_MODULE:?}"
: "${MAIN_PKGS:?}" "${WAITING_PKGS:?}" "${OLDER_PKGS:?}"

out=$(mktemp -d)
# The example controllers the suites run as processes are built once for
# the whole run, not once per test process and minor (test/demo's
# SharedBuildsEnv); the directory goes with the run.
export BINDKIT_TEST_BUILDS=$out/builds
mkdir "$BINDKIT_TEST_BUILDS"
lanes=()
stop() {
	# An early exit (Ctrl-C, a killed make) stops every lane: each runs in
	# a process group of its own (set -m below), which holds its shell, go
	# test and the test binaries (a control plane dies with the test binary
	# that started it).
	local pid
	for pid in "${lanes[@]}"; do
		kill -TERM -- "-$pid" 2>/dev/null
	done
	rm -rf "$out"
}
trap stop EXIT
trap 'exit 130' INT TERM

# The steps a lane runs. TEST_FLAGS and the package lists are split on
# spaces on purpose.
newest() { $GO test $TEST_FLAGS "$@"; }
older() { BINDKIT_KUBE_MINOR=$OLDER_MINOR $GO test $TEST_FLAGS "$@"; }
# module newest|older: the controller-runtime module's tests on that minor.
module() { (cd "$CR_MODULE" && "$1" ./...); }

# lane NAME STEP...: runs each step (a command line of the functions
# above) in turn, even after one fails, and reports the lane's time.
lane() {
	local name=$1 start=$SECONDS failed=0 step
	shift
	for step in "$@"; do
		echo "[$name] $step"
		eval "$step" || failed=1
	done
	echo "[$name] done in $((SECONDS - start)) s: $([ $failed = 0 ] && echo ok || echo FAILED)"
	return $failed
}

# Every lane runs in the background, the main one too (the shell runs its
# traps only between commands, and wait is one it leaves at once for a
# signal), each in a process group of its own.
set -m
lane main 'newest $MAIN_PKGS' &
lanes+=($!)
lane waiting 'newest -p 3 $WAITING_PKGS' 'module newest' >"$out/waiting" 2>&1 &
lanes+=($!)
lane older 'older -p 3 $OLDER_PKGS' 'module older' >"$out/older" 2>&1 &
lanes+=($!)
echo "two lanes run beside this one (waiting, older); their output follows this one's"

failed=0
for pid in "${lanes[@]}"; do
	wait "$pid" || failed=1
done
lanes=()
cat "$out/waiting" "$out/older"
[ $failed = 0 ] && echo "make test: every lane passed" || echo "make test: a lane FAILED (search for FAIL above)"
exit $failed
