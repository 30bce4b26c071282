// Package conformance is Kubernetes' API-machinery e2e suite, built from the
// pinned k8s.io/kubernetes module: the specs of test/e2e/apimachinery with the
// framework's flags wired as upstream's test/e2e/e2e_test.go wires them. It
// leaves out upstream's suite setup (waiting for nodes, system pods and
// daemonsets), since the control plane it runs against has no nodes.
//
// make conformance builds it with go test -c into bin/conformance/e2e.test and
// runs it from internal/e2e's TestConformance.
package conformance

import (
	"flag"
	"fmt"
	"os"
	"testing"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	"k8s.io/component-base/logs"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/test/e2e/framework"
	"k8s.io/kubernetes/test/e2e/framework/config"

	// The specs.
	_ "k8s.io/kubernetes/test/e2e/apimachinery"
	// Define and freeze the feature constants the specs' labels use.
	_ "k8s.io/kubernetes/test/e2e/feature"
	// Dump a failed spec's namespace (events, pods) into its report.
	_ "k8s.io/kubernetes/test/e2e/framework/debug/init"
	// The logging flags (-v, --vmodule) on the command line.
	_ "k8s.io/component-base/logs/testinit"
)

func TestMain(m *testing.M) {
	config.CopyFlags(config.Flags, flag.CommandLine)
	framework.RegisterCommonFlags(flag.CommandLine)
	framework.RegisterClusterFlags(flag.CommandLine)
	flag.Parse()
	if flag.CommandLine.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "unknown additional command line arguments: %s\n", flag.CommandLine.Args())
		os.Exit(1)
	}
	framework.AfterReadingAllFlags(&framework.TestContext)
	os.Exit(m.Run())
}

// TestE2E runs the selected specs as upstream's RunE2ETests does.
func TestE2E(t *testing.T) {
	logs.InitLogs()
	defer logs.FlushLogs()
	klog.EnableContextualLogging(true)
	gomega.RegisterFailHandler(framework.Fail)
	suiteConfig, reporterConfig := framework.CreateGinkgoConfig()
	ginkgo.RunSpecs(t, "Kubernetes API machinery e2e suite", suiteConfig, reporterConfig)
}
