package e2e

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/sharding"
)

// pendingDiffs are the cases in which informerd answers otherwise than
// the API server today, each with what differs: defects being fixed. Such
// a case is logged, not failed; once it agrees it fails until it is
// removed from here, so the list stays honest.
var pendingDiffs = map[string]string{
	"list configmaps continue invalid": "400 on both; the API server says \"invalid continue token: continue key is not valid: illegal base64 data ...\", informerd words its own",
}

// documentedDiffs are the cases in which informerd answers otherwise on
// purpose, each with the reason docs/api.md gives. Logged, not failed;
// one that agrees fails until it is removed here and from docs/api.md.
var documentedDiffs = map[string]string{
	"get configmap rv invalid":         "docs/api.md: a non-numeric resourceVersion is 400 (the API server answers get with 500 and no reason)",
	"watch configmaps rv invalid":      "docs/api.md: a non-numeric resourceVersion is 400 (the API server answers watch with 500 and no reason)",
	"get configmap drop managedFields": "docs/api.md: informerd honours KEP-5958's Accept parameter drop=metadata.managedFields (alpha in 1.38); v1.37.2 ignores it and sends them",
}

// TestKubeAPIDifferential sends the same raw requests, with the same
// ServiceAccount token, to the API server and to informerd's Kubernetes
// API, and wants the same answers (see answer for what is compared): get,
// list and watch of namespaced and cluster-scoped resources at every path,
// every read parameter, selector and resourceVersion rule, pages, Tables
// and media types.
func TestKubeAPIDifferential(t *testing.T) {
	w := startDiff(t)
	cases := diffCases(w)
	names := map[string]bool{}
	for _, c := range cases {
		if names[c.name] {
			t.Fatalf("two cases are named %q", c.name)
		}
		names[c.name] = true
	}
	for _, m := range []map[string]string{pendingDiffs, documentedDiffs} {
		for name := range m {
			if !names[name] {
				t.Errorf("%q is listed as a difference but is no case", name)
			}
		}
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			answered, forwarded := w.routes(t)
			direct, cached := w.run(t, c)
			w.checkRoute(t, c, len(cached), answered, forwarded)
			want := c.code
			if want == 0 {
				want = http.StatusOK
			}
			if len(direct) > 0 && direct[0].Code != want {
				t.Errorf("the API server answered %d, the case expects %d: the case is wrong", direct[0].Code, want)
			}
			judge(t, c.name, cmp.Diff(direct, cached))
		})
	}
}

// judge fails the case on a difference, unless it is pending or
// documented, and fails a pending or documented case that agrees.
func judge(t *testing.T, name, diff string) {
	t.Helper()
	pending, isPending := pendingDiffs[name]
	documented, isDocumented := documentedDiffs[name]
	switch {
	case diff == "" && isPending:
		t.Errorf("case %q agrees now: remove it from pendingDiffs", name)
	case diff == "" && isDocumented:
		t.Errorf("case %q agrees now: remove it from documentedDiffs and docs/api.md", name)
	case diff == "":
	case isPending:
		t.Logf("pending difference (%s) (-API server +informerd):\n%s", pending, diff)
	case isDocumented:
		t.Logf("documented difference (%s) (-API server +informerd):\n%s", documented, diff)
	default:
		t.Errorf("informerd differs from the API server (-API server +informerd):\n%s", diff)
	}
}

// diffCases is the suite's table, in the order it runs: a case may see
// the writes of the cases before it (both servers do), and the cases
// after an etcd compaction come last.
func diffCases(w *diffWorld) []diffCase {
	const (
		cms   = "/api/v1/namespaces/{ns}/configmaps"
		pods  = "/api/v1/namespaces/{ns}/pods"
		pcs   = "/apis/scheduling.k8s.io/v1/priorityclasses"
		roles = "/apis/rbac.authorization.k8s.io/v1/clusterroles"
	)
	relabelPod := func(t *testing.T) {
		w.updateLabels(t, "pods", diffNS, "p1", map[string]string{"app": "p1", "seen": "yes"})
	}
	return []diffCase{
		// Get.
		{name: "get configmap", path: cms + "/a"},
		{name: "get configmap that does not exist", path: cms + "/nope", code: 404},
		{name: "get configmap that does not exist as a table", path: cms + "/nope", accept: tableAccept, code: 404},
		{name: "get configmap rv=0", path: cms + "/a", query: "resourceVersion=0"},
		{name: "get configmap rv=current", path: cms + "/a", query: "resourceVersion={rv}"},
		{name: "get configmap rv from another resource", path: cms + "/a", query: "resourceVersion={otherRV}", before: relabelPod, route: routeAny},
		{name: "get configmap rv far ahead", path: cms + "/a", query: "resourceVersion={futureRV}", code: 504, route: routeAny},
		{name: "get configmap rv far ahead timeout=1s", path: cms + "/a", query: "resourceVersion={futureRV}&timeout=1s", code: 504, route: routeAny},
		{name: "get configmap rv invalid", path: cms + "/a", query: "resourceVersion=abc", code: 500},
		{name: "head configmap", method: http.MethodHead, path: cms + "/a", code: 405, route: routeAny},
		{name: "get configmap resourceVersionMatch", path: cms + "/a", query: "resourceVersion={rv}&resourceVersionMatch=NotOlderThan"},
		{name: "get configmap pretty=true", path: cms + "/a", query: "pretty=true"},
		{name: "get configmap as curl", path: cms + "/a", header: http.Header{"User-Agent": {"curl/8.5.0"}}},
		{name: "get configmap timeout=invalid", path: cms + "/a", query: "timeout=invalid", code: 400},
		{name: "get configmap timeout=10s", path: cms + "/a", query: "timeout=10s"},
		{name: "get configmap yaml", path: cms + "/a", accept: "application/yaml"},
		{name: "get configmap json", path: cms + "/a", accept: "application/json"},
		{name: "get configmap unsupported media type", path: cms + "/a", accept: "text/html", code: 406},
		{name: "get configmap protobuf", path: cms + "/a", accept: "application/vnd.kubernetes.protobuf"},
		{name: "get configmap that does not exist in protobuf", path: cms + "/nope", accept: "application/vnd.kubernetes.protobuf", code: 404},
		{name: "get configmap as PartialObjectMetadata in protobuf", path: cms + "/a", accept: "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"},
		{name: "get configmap as a table in protobuf", path: cms + "/a", accept: "application/vnd.kubernetes.protobuf;as=Table;g=meta.k8s.io;v=v1", code: 406},
		{name: "get configmap table", path: cms + "/a", accept: tableAccept},
		{name: "get configmap table includeObject=Object", path: cms + "/a", query: "includeObject=Object", accept: tableAccept},
		{name: "get configmap table includeObject=None", path: cms + "/a", query: "includeObject=None", accept: tableAccept},
		{name: "get configmap as PartialObjectMetadata", path: cms + "/a", accept: metaAccept},
		{name: "get configmap as PartialObjectMetadata v1beta1", path: cms + "/a", accept: "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1beta1"},
		{name: "get configmap as PartialObjectMetadata yaml", path: cms + "/a", accept: "application/yaml;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"},
		{name: "get configmap as PartialObjectMetadata or json", path: cms + "/a", accept: metaAccept + ",application/json"},
		{name: "get configmap as PartialObjectMetadataList", path: cms + "/a", accept: metaListAccept, code: 406},
		{name: "get configmap as PartialObjectMetadata of another group", path: cms + "/a", accept: "application/json;as=PartialObjectMetadata;g=example.com;v=v1", code: 406},
		{name: "get configmap drop managedFields", path: cms + "/a", accept: "application/json;drop=metadata.managedFields"},
		{name: "get configmap gzip", path: cms + "/a", header: http.Header{"Accept-Encoding": {"gzip"}}},
		{name: "get pod", path: pods + "/p1"},
		{name: "get namespace", path: "/api/v1/namespaces/{ns}"},
		{name: "get namespace rv=0", path: "/api/v1/namespaces/{ns}", query: "resourceVersion=0"},
		{name: "get namespace that does not exist", path: "/api/v1/namespaces/nope", code: 404},
		{name: "get namespace under a namespace", path: "/api/v1/namespaces/{ns}/namespaces/{ns}", code: 404, route: routeAny},
		{name: "get priorityclass", path: pcs + "/{pc}"},
		{name: "get priorityclass under a namespace", path: "/apis/scheduling.k8s.io/v1/namespaces/{ns}/priorityclasses/{pc}", code: 404, route: routeAny},
		{name: "get clusterrole with the default transform", path: roles + "/{cr}"},

		// List: resourceVersion and resourceVersionMatch.
		{name: "list configmaps", path: cms},
		{name: "list configmaps right after a write", path: cms, before: func(t *testing.T) { w.createConfigMap(t, "fresh", nil) }},
		{name: "list configmaps rv=0", path: cms, query: "resourceVersion=0"},
		{name: "list configmaps rv=0 limit=2", path: cms, query: "resourceVersion=0&limit=2"},
		{name: "list configmaps rv=current", path: cms, query: "resourceVersion={rv}"},
		{name: "list configmaps rv=current limit=2", path: cms, query: "resourceVersion={rv}&limit=2", pages: 10},
		{name: "list configmaps NotOlderThan current", path: cms, query: "resourceVersion={rv}&resourceVersionMatch=NotOlderThan"},
		{name: "list configmaps NotOlderThan rv=0", path: cms, query: "resourceVersion=0&resourceVersionMatch=NotOlderThan"},
		{name: "list configmaps Exact current", path: cms, query: "resourceVersion={rv}&resourceVersionMatch=Exact"},
		{name: "list configmaps Exact current limit=2", path: cms, query: "resourceVersion={rv}&resourceVersionMatch=Exact&limit=2", pages: 10},
		{name: "list configmaps Exact before later writes", path: cms, query: "resourceVersion={worldRV}&resourceVersionMatch=Exact"},
		{name: "list configmaps Exact rv=0", path: cms, query: "resourceVersion=0&resourceVersionMatch=Exact", code: 422},
		{name: "list configmaps NotOlderThan without rv", path: cms, query: "resourceVersionMatch=NotOlderThan", code: 422},
		{name: "list configmaps Exact without rv", path: cms, query: "resourceVersionMatch=Exact", code: 422},
		{name: "list configmaps unknown resourceVersionMatch", path: cms, query: "resourceVersion={rv}&resourceVersionMatch=Newest", code: 422},
		{name: "list configmaps rv invalid", path: cms, query: "resourceVersion=abc", code: 400},
		{name: "list configmaps rv negative", path: cms, query: "resourceVersion=-1", code: 400},
		{name: "list configmaps rv far ahead", path: cms, query: "resourceVersion={futureRV}", code: 504, route: routeAny},
		{name: "list configmaps NotOlderThan far ahead", path: cms, query: "resourceVersion={futureRV}&resourceVersionMatch=NotOlderThan", code: 504, route: routeAny},
		{name: "list configmaps Exact far ahead", path: cms, query: "resourceVersion={futureRV}&resourceVersionMatch=Exact", code: 504, route: routeAny},
		{name: "list configmaps rv far ahead timeout=1s", path: cms, query: "resourceVersion={futureRV}&timeout=1s", code: 504, route: routeAny},
		{name: "list configmaps NotOlderThan from another resource", path: cms, query: "resourceVersion={otherRV}&resourceVersionMatch=NotOlderThan", before: relabelPod, route: routeAny},
		{name: "list configmaps Exact from another resource", path: cms, query: "resourceVersion={otherRV}&resourceVersionMatch=Exact", before: relabelPod, route: routeAny},

		// List: limit and continue.
		{name: "list configmaps limit=0", path: cms, query: "limit=0"},
		{name: "list configmaps limit=-1", path: cms, query: "limit=-1"},
		{name: "list configmaps limit=2", path: cms, query: "limit=2"},
		{name: "list configmaps limit=2 to the end", path: cms, query: "limit=2", pages: 10},
		{name: "list configmaps limit=1000000", path: cms, query: "limit=1000000"},
		{name: "list configmaps continue after writes", path: cms, query: "limit=2", pages: 10, between: func(t *testing.T) {
			w.createConfigMap(t, "late", nil)
			w.updateLabels(t, "configmaps", diffNS, "a", map[string]string{"app": "web", "tier": "front", "seen": "yes"})
		}},
		{name: "list configmaps continue invalid", path: cms, query: "limit=2&continue=bogus", code: 400},
		{name: "list configmaps continue with rv", path: cms, query: "limit=2", pages: 1, next: "&resourceVersion={rv}"},
		{name: "list configmaps continue with resourceVersionMatch", path: cms, query: "limit=2", pages: 1, next: "&resourceVersion={rv}&resourceVersionMatch=NotOlderThan"},

		// List: other parameters and media types.
		{name: "list configmaps timeoutSeconds=5", path: cms, query: "timeoutSeconds=5"},
		{name: "list configmaps timeout=invalid", path: cms, query: "timeout=invalid", code: 400},
		{name: "list configmaps timeout=10s", path: cms, query: "timeout=10s"},
		{name: "list configmaps sendInitialEvents", path: cms, query: "sendInitialEvents=true", code: 422},
		{name: "list configmaps allowWatchBookmarks", path: cms, query: "allowWatchBookmarks=true"},
		{name: "list configmaps pretty=true", path: cms, query: "pretty=true"},
		{name: "list configmaps unknown parameter", path: cms, query: "color=blue"},
		{name: "list configmaps yaml", path: cms, accept: "application/yaml"},
		{name: "list configmaps json", path: cms, accept: "application/json"},
		{name: "list configmaps unsupported media type", path: cms, accept: "text/html", code: 406},
		{name: "list configmaps protobuf", path: cms, accept: "application/vnd.kubernetes.protobuf"},
		{name: "list configmaps as PartialObjectMetadataList", path: cms, accept: metaListAccept},
		{name: "list configmaps as PartialObjectMetadataList v1beta1", path: cms, accept: "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1beta1"},
		{name: "list configmaps as PartialObjectMetadataList limit=2", path: cms, query: "limit=2", accept: metaListAccept, pages: 10},
		{name: "list configmaps as PartialObjectMetadata", path: cms, accept: metaAccept, code: 406},
		{name: "list configmaps as PartialObjectMetadataList or json", path: cms, accept: metaListAccept + ",application/json"},
		{name: "list clusterroles as PartialObjectMetadataList", path: roles, accept: metaListAccept},
		{name: "list configmaps gzip", path: cms, header: http.Header{"Accept-Encoding": {"gzip"}}},
		{name: "list configmaps table", path: cms, accept: tableAccept},
		{name: "list configmaps table limit=2", path: cms, query: "limit=2", accept: tableAccept, pages: 10},
		{name: "list configmaps table includeObject=None", path: cms, query: "includeObject=None", accept: tableAccept},
		{name: "list configmaps table includeObject=Object", path: cms, query: "includeObject=Object", accept: tableAccept},
		{name: "list configmaps table includeObject invalid", path: cms, query: "includeObject=All", accept: tableAccept, code: 400},
		{name: "list pods table", path: pods, accept: tableAccept},
		{name: "list priorityclasses table", path: pcs, accept: tableAccept},
		{name: "list clusterroles table", path: roles, accept: tableAccept},

		// List: label selectors.
		{name: "labels =", path: cms, query: "labelSelector=app%3Dweb"},
		{name: "labels ==", path: cms, query: "labelSelector=app%3D%3Dweb"},
		{name: "labels !=", path: cms, query: "labelSelector=app!%3Dweb"},
		{name: "labels in", path: cms, query: "labelSelector=app+in+(web,db)"},
		{name: "labels notin", path: cms, query: "labelSelector=app+notin+(web)"},
		{name: "labels exists", path: cms, query: "labelSelector=tier"},
		{name: "labels !key", path: cms, query: "labelSelector=!app"},
		{name: "labels two requirements", path: cms, query: "labelSelector=app%3Dweb,tier%3Dfront"},
		{name: "labels empty value", path: cms, query: "labelSelector=tier%3D"},
		{name: "labels bad syntax", path: cms, query: "labelSelector=app+in+(web", code: 400},
		{name: "labels bad value", path: cms, query: "labelSelector=app%3D-web-", code: 400},

		// List: field selectors.
		{name: "shard uid first half", path: cms, query: "shardSelector=" + shardRange("uid", "0x0000000000000000", "0x8000000000000000")},
		{name: "shard uid second half", path: cms, query: "shardSelector=" + shardRange("uid", "0x8000000000000000", "0x10000000000000000")},
		{name: "shard uid two ranges", path: cms, query: "shardSelector=" + shardRange("uid", "0x0000000000000000", "0x4000000000000000") + "+%7C%7C+" + shardRange("uid", "0xc000000000000000", "0x10000000000000000")},
		{name: "shard namespace in every namespace", path: "/api/v1/configmaps", query: "shardSelector=" + shardRange("namespace", "0x0000000000000000", "0x8000000000000000")},
		{name: "shard uid limit=2", path: cms, query: "limit=2&shardSelector=" + shardRange("uid", "0x0000000000000000", "0xa000000000000000"), pages: 10},
		{name: "shard uid with labels", path: cms, query: "labelSelector=app&shardSelector=" + shardRange("uid", "0x4000000000000000", "0x10000000000000000")},
		{name: "shard uid table", path: cms, accept: tableAccept, query: "shardSelector=" + shardRange("uid", "0x0000000000000000", "0x8000000000000000")},
		{name: "shard invalid", path: cms, query: "shardSelector=shardRange(object.metadata.name,'0x0','0x8')", code: 500},
		// A watch's writes are to objects of the suite's namespace, whose
		// uids are random: its shard is the namespace's.
		{name: "watch shard namespace", path: "/api/v1/configmaps", query: "watch=true&resourceVersion={rv}&shardSelector=" + nsShard(), between: w.churn("w36")},
		{name: "watch shard sendInitialEvents", path: cms, query: "watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&shardSelector=" + nsShard(), between: w.churn("w37")},
		{name: "fields metadata.name=", path: cms, query: "fieldSelector=metadata.name%3Da"},
		{name: "fields metadata.name==", path: cms, query: "fieldSelector=metadata.name%3D%3Da"},
		{name: "fields metadata.name!=", path: cms, query: "fieldSelector=metadata.name!%3Da"},
		{name: "fields metadata.namespace=", path: cms, query: "fieldSelector=metadata.namespace%3D{ns}"},
		{name: "fields metadata.namespace!=", path: cms, query: "fieldSelector=metadata.namespace!%3D{ns}"},
		{name: "fields name and namespace", path: cms, query: "fieldSelector=metadata.name%3Da,metadata.namespace%3D{ns}"},
		{name: "fields and labels", path: cms, query: "fieldSelector=metadata.name!%3Da&labelSelector=app%3Dweb"},
		{name: "fields bad syntax", path: cms, query: "fieldSelector=metadata.name", code: 400},
		{name: "fields unsupported field", path: cms, query: "fieldSelector=data.k%3Da", code: 400},
		{name: "fields pods spec.nodeName=", path: pods, query: "fieldSelector=spec.nodeName%3Dn1"},
		{name: "fields pods spec.nodeName!=", path: pods, query: "fieldSelector=spec.nodeName!%3Dn1"},
		{name: "fields pods spec.nodeName= empty", path: pods, query: "fieldSelector=spec.nodeName%3D"},
		{name: "fields pods status.phase", path: pods, query: "fieldSelector=status.phase%3DPending"},
		{name: "fields pods status.phase!=", path: pods, query: "fieldSelector=status.phase!%3DSucceeded"},
		{name: "fields pods spec.schedulerName", path: pods, query: "fieldSelector=spec.schedulerName%3Ddefault-scheduler"},
		{name: "fields pods spec.restartPolicy and node", path: pods, query: "fieldSelector=spec.restartPolicy%3DAlways,spec.nodeName%3Dn1"},
		{name: "fields pods spec.hostNetwork", path: pods, query: "fieldSelector=spec.hostNetwork%3Dfalse"},
		{name: "fields pods spec.serviceAccountName", path: pods, query: "fieldSelector=spec.serviceAccountName%3Ddefault"},
		{name: "fields pods status.podIP empty", path: pods, query: "fieldSelector=status.podIP%3D"},
		{name: "fields pods status.podIPs", path: pods, query: "fieldSelector=status.podIPs%3D"},
		{name: "fields pods spec.host", path: pods, query: "fieldSelector=spec.host%3Dn1"},
		{name: "fields pods unsupported field", path: pods, query: "fieldSelector=spec.priority%3D0", code: 400},
		{name: "fields pods in every namespace", path: "/api/v1/pods", query: "fieldSelector=status.phase%3DPending,metadata.namespace%3D{ns}"},
		{name: "fields namespaces status.phase", path: "/api/v1/namespaces", query: "fieldSelector=status.phase%3DActive,metadata.name%3D{ns}"},
		{name: "fields namespaces metadata.namespace", path: "/api/v1/namespaces", query: "fieldSelector=metadata.namespace%3D{ns}", code: 400},
		{name: "fields clusterroles metadata.namespace", path: roles, query: "fieldSelector=metadata.namespace%3D", route: routeAny},
		{name: "watch pods by phase", path: pods, query: "watch=true&fieldSelector=status.phase%3DPending", between: relabelPod},

		// List: every namespace, and cluster-scoped resources.
		{name: "list configmaps in every namespace", path: "/api/v1/configmaps"},
		{name: "list configmaps in every namespace by name", path: "/api/v1/configmaps", query: "fieldSelector=metadata.name%3Dshared"},
		{name: "list configmaps in every namespace by namespace", path: "/api/v1/configmaps", query: "fieldSelector=metadata.namespace%3D{ns2}"},
		{name: "list configmaps in every namespace by label", path: "/api/v1/configmaps", query: "labelSelector=tier%3Dfront"},
		{name: "list pods", path: pods},
		{name: "list pods in every namespace", path: "/api/v1/pods"},
		{name: "list pods in every namespace by node", path: "/api/v1/pods", query: "fieldSelector=spec.nodeName%3Dn1"},
		{name: "list namespaces", path: "/api/v1/namespaces"},
		{name: "list namespaces by label", path: "/api/v1/namespaces", query: "labelSelector=team%3Ddiff"},
		{name: "list namespaces by name", path: "/api/v1/namespaces", query: "fieldSelector=metadata.name%3D{ns}"},
		{name: "list namespaces limit=5 to the end", path: "/api/v1/namespaces", query: "limit=5", pages: 50},
		{name: "list namespaces under a namespace", path: "/api/v1/namespaces/{ns}/namespaces", code: 404, route: routeAny},
		{name: "list nodes under a namespace", path: "/api/v1/namespaces/{ns}/nodes", code: 404, route: routeForward},
		{name: "list priorityclasses", path: pcs},
		{name: "list priorityclasses by name", path: pcs, query: "fieldSelector=metadata.name%3D{pc}"},
		{name: "list priorityclasses under a namespace", path: "/apis/scheduling.k8s.io/v1/namespaces/{ns}/priorityclasses", code: 404, route: routeAny},
		{name: "list clusterroles with the default transform", path: roles, query: "fieldSelector=metadata.name%3D{cr}"},

		// Watch.
		{name: "watch configmaps", path: cms, query: "watch=true", between: w.churn("w01")},
		{name: "watch configmaps watch=1", path: cms, query: "watch=1&resourceVersion={rv}", between: w.churn("w02")},
		{name: "watch configmaps rv=0", path: cms, query: "watch=true&resourceVersion=0", between: w.churn("w03")},
		{name: "watch configmaps rv=current", path: cms, query: "watch=true&resourceVersion={rv}", between: w.churn("w04")},
		{name: "watch configmaps from before later writes", path: cms, query: "watch=true&resourceVersion={worldRV}", between: w.churn("w05")},
		{name: "watch configmaps rv from another resource", path: cms, query: "watch=true&resourceVersion={otherRV}", before: relabelPod, between: w.churn("w06"), route: routeAny},
		{name: "watch configmaps sendInitialEvents", path: cms, query: "watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true", between: w.churn("w07")},
		{name: "watch configmaps sendInitialEvents rv=0", path: cms, query: "watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&resourceVersion=0", between: w.churn("w08")},
		{name: "watch configmaps sendInitialEvents rv=current", path: cms, query: "watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&resourceVersion={rv}", between: w.churn("w09")},
		{name: "watch configmaps sendInitialEvents=false", path: cms, query: "watch=true&sendInitialEvents=false&resourceVersionMatch=NotOlderThan&resourceVersion={rv}", between: w.churn("w10")},
		{name: "watch configmaps sendInitialEvents without bookmarks", path: cms, query: "watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan", between: w.churn("w11")},
		{name: "watch configmaps sendInitialEvents without resourceVersionMatch", path: cms, query: "watch=true&sendInitialEvents=true&allowWatchBookmarks=true", code: 422},
		{name: "watch configmaps Exact", path: cms, query: "watch=true&resourceVersion={rv}&resourceVersionMatch=Exact", code: 422},
		{name: "watch configmaps NotOlderThan without sendInitialEvents", path: cms, query: "watch=true&resourceVersion={rv}&resourceVersionMatch=NotOlderThan", code: 422},
		{name: "watch configmaps rv invalid", path: cms, query: "watch=true&resourceVersion=abc", code: 500},
		{name: "watch configmaps rv far ahead", path: cms, query: "watch=true&resourceVersion={futureRV}&timeoutSeconds=5", route: routeAny},
		{name: "watch configmaps by label", path: cms, query: "watch=true&resourceVersion={rv}&labelSelector=app%3Dweb", between: w.churn("w12")},
		{name: "watch configmaps by label notin", path: cms, query: "watch=true&resourceVersion={rv}&labelSelector=app+notin+(db)", between: w.churn("w13")},
		{name: "watch configmaps by name", path: cms, query: "watch=true&resourceVersion={rv}&fieldSelector=metadata.name%3Dw14", between: w.churn("w14")},
		{name: "watch configmaps by name from the start", path: cms, query: "watch=true&fieldSelector=metadata.name%3Da", between: func(t *testing.T) {
			w.updateLabels(t, "configmaps", diffNS, "a", map[string]string{"app": "web", "tier": "front"})
		}},
		{name: "watch configmaps bad label selector", path: cms, query: "watch=true&labelSelector=app+in+(web", code: 400},
		{name: "watch configmaps timeoutSeconds=0", path: cms, query: "watch=true&resourceVersion={rv}&timeoutSeconds=0", between: w.churn("w15")},
		{name: "watch configmaps timeoutSeconds=1", path: cms, query: "watch=true&resourceVersion={rv}&timeoutSeconds=1"},
		{name: "watch configmaps allowWatchBookmarks", path: cms, query: "watch=true&resourceVersion={rv}&allowWatchBookmarks=true", between: w.churn("w16")},
		{name: "watch configmaps limit=1", path: cms, query: "watch=true&resourceVersion={rv}&limit=1", between: w.churn("w17")},
		{name: "watch configmaps timeout=invalid", path: cms, query: "watch=true&resourceVersion={rv}&timeoutSeconds=1&timeout=invalid"},
		{name: "watch configmaps pretty=true", path: cms, query: "watch=true&resourceVersion={rv}&pretty=true", between: w.churn("w18")},
		{name: "watch configmaps legacy path", path: "/api/v1/watch/namespaces/{ns}/configmaps", query: "resourceVersion={rv}", between: w.churn("w19")},
		{name: "watch one configmap legacy path", path: "/api/v1/watch/namespaces/{ns}/configmaps/w20", query: "resourceVersion={rv}", between: w.churn("w20")},
		{name: "watch configmaps in every namespace", path: "/api/v1/configmaps", query: "watch=true&resourceVersion={rv}", between: w.churn("w21")},
		{name: "watch configmaps in every namespace legacy path", path: "/api/v1/watch/configmaps", query: "resourceVersion={rv}", between: w.churn("w22")},
		{name: "watch configmaps in every namespace by name", path: "/api/v1/configmaps", query: "watch=true&resourceVersion={rv}&fieldSelector=metadata.name%3Dw23", between: w.churn("w23")},
		{name: "watch configmaps yaml", path: cms, query: "watch=true&resourceVersion={rv}", accept: "application/yaml", code: 406},
		{name: "watch configmaps table", path: cms, query: "watch=true&resourceVersion={rv}", accept: tableAccept, between: w.churn("w25")},
		{name: "watch configmaps table with initial events", path: cms, query: "watch=true&resourceVersion=0", accept: tableAccept, between: w.churn("w26")},
		{name: "watch configmaps table sendInitialEvents", path: cms, query: "watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true", accept: tableAccept, between: w.churn("w30")},
		{name: "watch configmaps table includeObject=Object", path: cms, query: "watch=true&resourceVersion={rv}&includeObject=Object", accept: tableAccept, between: w.churn("w27")},
		{name: "watch configmaps as PartialObjectMetadata", path: cms, query: "watch=true&resourceVersion={rv}", accept: metaAccept, between: w.churn("w31")},
		{name: "watch configmaps as PartialObjectMetadata sendInitialEvents", path: cms, query: "watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true", accept: metaAccept, between: w.churn("w32")},
		{name: "watch configmaps as PartialObjectMetadataList", path: cms, query: "watch=true&resourceVersion={rv}", accept: metaListAccept, between: w.churn("w33"), endsEarly: true},
		{name: "watch configmaps sendInitialEvents gzip", path: cms, query: "watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true", header: http.Header{"Accept-Encoding": {"gzip"}}, between: w.churn("w34")},
		{name: "watch configmaps gzip", path: cms, query: "watch=true&resourceVersion={rv}", header: http.Header{"Accept-Encoding": {"gzip"}}, between: w.churn("w35")},
		{name: "watch pods", path: pods, query: "watch=true", between: relabelPod},
		{name: "watch pods by node", path: pods, query: "watch=true&fieldSelector=spec.nodeName%3Dn1", between: func(t *testing.T) {
			w.updateLabels(t, "pods", diffNS, "p2", map[string]string{"app": "p2", "seen": "yes"})
		}},
		{name: "watch namespace legacy path", path: "/api/v1/watch/namespaces/{ns}", query: "resourceVersion={rv}", between: w.relabel("namespaces", "", diffNS, 2)},
		{name: "watch namespaces by name", path: "/api/v1/namespaces", query: "watch=true&fieldSelector=metadata.name%3D{ns}", between: w.relabel("namespaces", "", diffNS, 2)},
		{name: "watch namespaces", path: "/api/v1/namespaces", query: "watch=true", between: w.relabel("namespaces", "", diffNS, 2)},
		{name: "watch namespaces under a namespace", path: "/api/v1/namespaces/{ns}/namespaces", query: "watch=true", code: 404, route: routeAny},
		{name: "watch priorityclasses", path: pcs, query: "watch=true&resourceVersion={rv}", between: w.relabel("priorityclasses.scheduling.k8s.io", "", diffPriority, 2)},

		// After an etcd compaction and a restart of the API server.
		{name: "list configmaps continue after compaction", path: cms, query: "limit=2", pages: 1, between: w.forgetHistory},
		{name: "list configmaps Exact too old", path: cms, query: "resourceVersion={oldRV}&resourceVersionMatch=Exact", code: 410, route: routeForward},
		{name: "list configmaps rv too old limit=2", path: cms, query: "resourceVersion={oldRV}&limit=2", code: 410, route: routeForward},
		{name: "list configmaps NotOlderThan too old", path: cms, query: "resourceVersion={oldRV}&resourceVersionMatch=NotOlderThan"},
		{name: "get configmap rv too old", path: cms + "/a", query: "resourceVersion={oldRV}"},
		{name: "watch configmaps rv too old", path: cms, query: "watch=true&resourceVersion={oldRV}"},
		{name: "watch configmaps sendInitialEvents rv too old", path: cms, query: "watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&resourceVersion={oldRV}", between: w.churn("w28")},
	}
}

// shardRange is a KEP-5866 shardSelector clause on object.metadata.field,
// query-escaped.
func shardRange(field, start, end string) string {
	return url.QueryEscape(fmt.Sprintf("shardRange(object.metadata.%s, '%s', '%s')", field, start, end))
}

// nsShard is a shardSelector of two ranges over object.metadata.namespace,
// one of which holds the suite's namespace.
func nsShard() string {
	h, err := strconv.ParseUint(sharding.HashField(diffNS), 16, 64)
	if err != nil {
		panic(err)
	}
	return shardRange("namespace", "0x0000000000000000", "0x0000000000000001") + "+%7C%7C+" +
		shardRange("namespace", fmt.Sprintf("0x%016x", h), fmt.Sprintf("0x%016x", h+1))
}
