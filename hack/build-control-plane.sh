#!/usr/bin/env bash
# Usage: hack/build-control-plane.sh TOOLS_MODULE_DIR OUT_DIR
#
# Builds kube-apiserver, kube-controller-manager, kube-scheduler and etcd from
# the Go module proxy at the versions the tools module in TOOLS_MODULE_DIR
# requires, into OUT_DIR. One `go build` builds all four, so the packages they share are
# compiled once. The Kubernetes binaries carry the version stamps a release
# build gives them, so /version reports the release (testenv checks it).
# Prints a progress line at most every 30 seconds.
set -euo pipefail

module=$1
out=$(mkdir -p "$2" && cd "$2" && pwd)
cd "$module"

read -r version released < <(go list -m -f '{{.Version}} {{.Time.UTC.Format "2006-01-02T15:04:05Z"}}' k8s.io/kubernetes)
if [[ ! $version =~ ^v([0-9]+)\.([0-9]+)\.[0-9]+$ ]]; then
	echo "$module: k8s.io/kubernetes $version is not a release version" >&2
	exit 1
fi
major=${BASH_REMATCH[1]} minor=${BASH_REMATCH[2]}

stamp=""
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
	stamp+=" -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor -X $pkg.gitVersion=$version"
	stamp+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=$released"
done

pkgs=(k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kube-scheduler ./etcd)
total=$(go list -deps "${pkgs[@]}" | wc -l)
etcd=$(go list -m -f '{{.Version}}' go.etcd.io/etcd/server/v3)
echo "building Kubernetes $version (kube-apiserver, kube-controller-manager, kube-scheduler) and etcd $etcd into $out"
echo "  $total packages; a first build takes about 5 minutes on 2 idle cores (longer on a busy machine), later ones reuse the Go build cache"

start=$SECONDS
# -v names each package as the build reaches it; any other line is an error
# message and passes through as is.
progress() {
	local line n=0 last=$SECONDS
	while IFS= read -r line; do
		if [[ $line =~ ^[A-Za-z0-9_./~-]+$ ]]; then
			n=$((n + 1))
			if ((SECONDS - last >= 30)); then
				last=$SECONDS
				printf '  %s: %d/%d packages, %dm%02ds\n' "$version" "$n" "$total" $(((SECONDS - start) / 60)) $(((SECONDS - start) % 60))
			fi
		else
			printf '%s\n' "$line"
		fi
	done
}
go build -v -ldflags "-s -w$stamp" -o "$out/" "${pkgs[@]}" 2>&1 | progress

# go build leaves an up-to-date binary untouched; make compares times, and
# treats the four as one build that kube-apiserver stands for.
touch "$out/kube-apiserver"
touch -r "$out/kube-apiserver" "$out/kube-controller-manager" "$out/kube-scheduler" "$out/etcd"
printf 'built Kubernetes %s into %s in %dm%02ds\n' "$version" "$out" $(((SECONDS - start) / 60)) $(((SECONDS - start) % 60))
