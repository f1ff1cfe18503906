#!/usr/bin/env bash
# Runs the go test invocations of `make test` in three lanes at once, prints
# the first lane as it runs and the others once they end, says how long
# each lane took, and fails if any step of any lane failed. The lanes:
#
#   main     the newest minor's pass but the suites that mostly wait
#   waiting  the newest minor's suites that mostly wait, three at a time,
#            then the controller-runtime module, its kubebuilder example's
#            own make test, then the plugin's module
#   older    the older minor's pass, three at a time: the test binaries the
#            other two lanes' go test linked (hack/test-exec.sh hands them
#            over as each starts), run again with BINDKIT_KUBE_MINOR set
#
# The Makefile's test target calls it with what it computes in the
# environment: GO, TEST_FLAGS, OLDER_MINOR, CR_MODULE, CR_EXAMPLE, PLUGIN_MODULE, BIN, the package lists
# MAIN_PKGS and WAITING_PKGS, and OLDER_DIRS, the directories of the
# packages (the module's too) that run against both minors (see the
# Makefile for what goes in which, and why).
#
# Why lanes: on 2 cores, one go test -p 2 over everything leaves a core
# idle for minutes while suites that mostly wait (lease expiries, rollout
# deadlines, an example binary's restarts) run two at a time, and the
# older minor's pass after the newest's leaves one idle again. Measured
# on 2 idle cores (CONTRIBUTING.md): 1,164 to 1,222 s for vet and the
# tests one pass after the other, 955 s in these lanes, 846 s with the
# older lane reusing the newest pass's test binaries.
set -uo pipefail

: "${GO:=go}" "${TEST_FLAGS:=-race -count=1}" "${OLDER_MINOR:?}" "${CR_MODULE:?}" "${CR_EXAMPLE:?}" "${PLUGIN_MODULE:?}" "${BIN:?}"
: "${MAIN_PKGS:?}" "${WAITING_PKGS:?}" "${OLDER_DIRS:?}"

hack=$(cd "$(dirname "$0")" && pwd -P)
root=$(dirname "$hack")
out=$(mktemp -d)
# The example controllers the suites run as processes are built once for
# the whole run, not once per test process and minor (test/demo's
# SharedBuildsEnv); the directory goes with the run.
export BINDKIT_TEST_BUILDS=$out/builds
# The older lane's queue of test binaries (hack/test-exec.sh).
export BINDKIT_OLDER_QUEUE=$out/queue
mkdir "$BINDKIT_TEST_BUILDS" "$BINDKIT_OLDER_QUEUE"
# As test-exec.sh sees them: physical paths.
realpath -e $OLDER_DIRS >"$BINDKIT_OLDER_QUEUE/dirs" || exit
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
# spaces on purpose. newest hands the binaries of the packages in
# OLDER_DIRS to the older lane as it runs them.
newest() { $GO test $TEST_FLAGS -exec "$hack/test-exec.sh" "$@"; }
# module DIR: the tests of the module in DIR (the controller-runtime
# module's, the plugin's).
module() { (cd "$1" && newest ./...); }
# kubebuilder-project DIR: a kubebuilder project's own make test, as its
# user runs it (make manifests generate fmt vet, then go test with
# envtest) on the newest minor's binaries; then fails if that changed a
# file of the project (its generated files were stale) or left one.
# controller-runtime's envtest gives a kube-apiserver 20 s to start, which
# a loaded CI machine (three lanes on 2 cores) exceeds: a user's loaded
# laptop raises it the same way.
kubebuilder-project() {
	(cd "$1" && GOWORK=off GOFLAGS= KUBEBUILDER_CONTROLPLANE_START_TIMEOUT=3m \
		make test KUBEBUILDER_ASSETS="$BIN") || return
	local changed
	changed=$(git -C "$1" status --porcelain -- .)
	if [ -n "$changed" ]; then
		echo "FAIL	$1: make test changed the project's files (run make manifests generate fmt there and commit):"
		echo "$changed"
		git -C "$1" diff -- . | head -50
		return 1
	fi
	echo "ok  	$1	(kubebuilder project: make test)"
}
# newest-done: tells the older lane one of the newest lanes is done.
newest-done() { touch "$BINDKIT_OLDER_QUEUE/$1.done"; }

# older: runs each test binary the newest lanes hand over, against the
# older minor, three at a time, until both newest lanes are done and
# nothing is left; then checks every package in OLDER_DIRS ran.
older() {
	local q=$BINDKIT_OLDER_QUEUE entry failed=0
	shopt -s nullglob
	while :; do
		local ready=("$q"/*.ready)
		if [ ${#ready[@]} = 0 ]; then
			[ -e "$q/main.done" ] && [ -e "$q/waiting.done" ] && break
			sleep 1
			continue
		fi
		for entry in "${ready[@]}"; do
			while [ "$(jobs -rp | wc -l)" -ge 3 ]; do wait -n; done
			mv "$entry" "${entry%.ready}.started"
			run-older "${entry%.ready}" &
		done
	done
	wait
	for entry in "$q"/*.failed; do failed=1; done
	local dir ran=("$q"/*.args)
	[ ${#ran[@]} = 0 ] && ran=(/dev/null)
	while read -r dir; do
		if ! head -qn1 "${ran[@]}" | grep -qFx -- "$dir"; then
			echo "FAIL	${dir#"$root"/}: not run against $OLDER_MINOR (its newest pass did not start it)"
			failed=1
		fi
	done <"$q/dirs"
	return $failed
}

# run-older ENTRY: one test binary against the older minor, in its
# package's directory, with go test's flags; prints as go test does.
run-older() {
	local args start=$SECONDS
	mapfile -t args <"$1.args"
	local dir=${args[0]} pkg=${args[0]#"$root"/}
	if (cd "$dir" && BINDKIT_KUBE_MINOR=$OLDER_MINOR exec "$1.test" "${args[@]:1}") >"$1.out" 2>&1; then
		printf 'ok  \t%s\t%ss\t(Kubernetes %s)\n' "$pkg" $((SECONDS - start)) "$OLDER_MINOR"
	else
		cat "$1.out"
		printf 'FAIL\t%s\t%ss\t(Kubernetes %s)\n' "$pkg" $((SECONDS - start)) "$OLDER_MINOR"
		touch "$1.failed"
	fi
	rm -f "$1.test"
}

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
lane main 'newest $MAIN_PKGS' 'newest-done main' &
lanes+=($!)
lane waiting 'newest -p 3 $WAITING_PKGS' 'module $CR_MODULE' 'kubebuilder-project $CR_EXAMPLE' 'module $PLUGIN_MODULE' 'newest-done waiting' >"$out/waiting.log" 2>&1 &
lanes+=($!)
lane older 'older' >"$out/older.log" 2>&1 &
lanes+=($!)
echo "two lanes run beside this one (waiting, older); their output follows this one's"

failed=0
for pid in "${lanes[@]}"; do
	wait "$pid" || failed=1
done
lanes=()
cat "$out/waiting.log" "$out/older.log"
[ $failed = 0 ] && echo "make test: every lane passed" || echo "make test: a lane FAILED (search for FAIL above)"
exit $failed
