#!/usr/bin/env bash
# go test -exec for the newest minor's pass (hack/test-lanes.sh): runs the
# test binary go test built, as go test would, after handing a link to it,
# with the flags go test gave it, to the older minor's lane when the
# package it tests is one that runs against both minors. One link serves
# both passes: a link with -race costs seconds of CPU, and about thirty
# packages run twice.
#
# go test runs this in the package's directory as: test-exec.sh BINARY
# FLAGS... The older lane's queue is BINDKIT_OLDER_QUEUE; the directories
# of the packages that run against both minors are listed, one per line,
# in its file dirs.
set -euo pipefail
binary=$1
shift
queue=${BINDKIT_OLDER_QUEUE:?}
dir=$(pwd -P)
if grep -qFx -- "$dir" "$queue/dirs"; then
	entry=$(mktemp -p "$queue" "$(date +%s%N)-XXXX")
	ln -f "$binary" "$entry.test" 2>/dev/null || cp "$binary" "$entry.test"
	printf '%s\n' "$dir" "$@" >"$entry.args"
	# Published last, whole: the older lane starts what has a .ready.
	mv "$entry" "$entry.ready"
fi
exec "$binary" "$@"
