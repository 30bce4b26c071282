// Command kube-apiserver is the upstream Kubernetes API server, built from the
// k8s.io/kubernetes module at the version pinned in go.mod. informerd's
// development and test control plane runs it; nothing here is modified.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

func main() {
	os.Exit(cli.Run(app.NewAPIServerCommand()))
}
