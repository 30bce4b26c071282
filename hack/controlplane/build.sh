#!/usr/bin/env bash
# Builds the pinned kube-apiserver and etcd for the local control plane, and
# kubectl for the tests of informerd's Kubernetes API, into
# bin/controlplane/<versions>/ and points bin/controlplane/current at it.
# Skips the build of each binary that is there for the pinned versions.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"

k8s_version="$(cd "$here/kube-apiserver" && go list -m -f '{{.Version}}' k8s.io/kubernetes)"
etcd_version="$(cd "$here/etcd" && go list -m -f '{{.Version}}' go.etcd.io/etcd/server/v3)"
if [[ -z "$k8s_version" || -z "$etcd_version" ]]; then
	echo "build.sh: cannot read the pinned versions from $here/*/go.mod" >&2
	exit 1
fi

name="kube-apiserver-${k8s_version}_etcd-${etcd_version}"
dest="$root/bin/controlplane/$name"

build() { # build <binary> <module dir> <package> [ldflags]
	local bin="$1" dir="$2" pkg="$3" ldflags="${4:-}"
	if [[ -x "$dest/$bin" ]]; then
		echo "controlplane: $bin for $name is up to date"
		return
	fi
	echo "controlplane: building $bin ($name); the first kube-apiserver build takes about 8 minutes on 2 cores, kubectl after it 1-2 more"
	local start=$SECONDS
	(cd "$dir" && go build -trimpath -ldflags "$ldflags" -o "$dest/$bin.tmp" "$pkg")
	mv "$dest/$bin.tmp" "$dest/$bin"
	echo "controlplane: built $bin in $((SECONDS - start))s"
}

mkdir -p "$dest"
build etcd "$here/etcd" .
# Stamp the version as Kubernetes' own build does, so /version reports it.
minor="${k8s_version#v1.}"
minor="${minor%%.*}"
vpkg=k8s.io/component-base/version
stamp="-X $vpkg.gitVersion=$k8s_version -X $vpkg.gitMajor=1 -X $vpkg.gitMinor=$minor -X $vpkg.gitTreeState=clean -X $vpkg.buildDate=1970-01-01T00:00:00Z"
build kube-apiserver "$here/kube-apiserver" . "$stamp"
# kubectl is a tool of the kube-apiserver module (its go.mod's tool
# directive), so it builds from the same pins, and mostly from packages the
# kube-apiserver build has just compiled.
build kubectl "$here/kube-apiserver" k8s.io/kubernetes/cmd/kubectl "$stamp"
ln -sfn "$name" "$root/bin/controlplane/current"
echo "controlplane: binaries in bin/controlplane/current -> $name"
