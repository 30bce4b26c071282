package printers

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"github.com/informerd/informerd/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, &env) }

// tableAccept asks kube-apiserver for a Table.
const tableAccept = "application/json;as=Table;v=v1;g=meta.k8s.io"

// servedTable is a metav1.Table as JSON decodes it: cells keep JSON's types
// (float64 numbers), as any client sees them.
type servedTable struct {
	ColumnDefinitions []metav1.TableColumnDefinition `json:"columnDefinitions"`
	Rows              []servedRow                    `json:"rows"`
}

type servedRow struct {
	Cells      []any                      `json:"cells"`
	Conditions []metav1.TableRowCondition `json:"conditions,omitempty"`
	Object     json.RawMessage            `json:"object"`
}

// getTable GETs path from kube-apiserver as a Table whose rows carry their
// objects, and returns it with the time of the response's Date header.
func getTable(t *testing.T, client *http.Client, path string) (servedTable, time.Time) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, strings.TrimSuffix(env.Config.Host, "/")+path+"?includeObject=Object", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", tableAccept)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s: %s", path, resp.Status, body)
	}
	var table servedTable
	if err := json.Unmarshal(body, &table); err != nil {
		t.Fatalf("GET %s: decode the table: %v", path, err)
	}
	date, err := http.ParseTime(resp.Header.Get("Date"))
	if err != nil {
		t.Fatalf("GET %s: Date header: %v", path, err)
	}
	return table, date
}

// asServed returns cells as a client decodes them from JSON, so that an int64
// compares equal to the float64 a client reads and a string never equals a
// number.
func asServed(t *testing.T, cells []any) []any {
	t.Helper()
	data, err := json.Marshal(cells)
	if err != nil {
		t.Fatal(err)
	}
	var out []any
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// nowCandidates are the times at which a row may have been printed. The
// server prints a row at some instant t of the second before its Date
// header was written (t <= Date < t+1s when printing and writing the header
// fall in the same second, which is nearly always). Ages of whole-second
// timestamps then equal those at Date; a print that straddled a second
// boundary, or a microsecond timestamp (events' eventTime), can make one
// age one second off. So a row matches when its cells equal ours at Date,
// Date-1s or Date+1s: ages of seconds are checked to within a second, all
// other cells exactly.
func nowCandidates(date time.Time) []time.Time {
	return []time.Time{date, date.Add(-time.Second), date.Add(time.Second)}
}

// compareRows compares the server's rows with ours computed at each candidate
// now by rows(now); it reports the diff at Date.
func compareRows(t *testing.T, served []servedRow, date time.Time, rows func(now time.Time) []metav1.TableRow) {
	t.Helper()
	var candidates [][]metav1.TableRow
	for _, now := range nowCandidates(date) {
		got := rows(now)
		if len(got) != len(served) {
			t.Fatalf("got %d rows, kube-apiserver served %d", len(got), len(served))
		}
		candidates = append(candidates, got)
	}
	for i, want := range served {
		var diff string
		for c, got := range candidates {
			d := cmp.Diff(want.Cells, asServed(t, got[i].Cells))
			if d == "" {
				d = cmp.Diff(want.Conditions, got[i].Conditions)
			}
			if d == "" {
				diff = ""
				break
			}
			if c == 0 {
				diff = d
			}
		}
		if diff != "" {
			t.Errorf("row %d (%s) differs from kube-apiserver's (-served +ours):\n%s\nobject: %s", i, rowName(want), diff, want.Object)
		}
	}
}

func rowName(r servedRow) string {
	var m struct {
		metav1.ObjectMeta `json:"metadata"`
	}
	_ = json.Unmarshal(r.Object, &m)
	return m.Namespace + "/" + m.Name
}

// resourceCase is one resource listed from kube-apiserver.
type resourceCase struct {
	gr   schema.GroupResource
	path string // the list's path
	// printed is false for a resource kube-apiserver prints with its default
	// table convertor: For must not know it.
	printed bool
	// minRows is the fewest rows the list must have, so that a case cannot
	// pass on an empty list.
	minRows int
}

func resourceCases() []resourceCase {
	return []resourceCase{
		{gr: schema.GroupResource{Resource: "pods"}, path: "/api/v1/pods", printed: true, minRows: 16},
		{gr: schema.GroupResource{Resource: "nodes"}, path: "/api/v1/nodes", printed: true, minRows: 3},
		{gr: schema.GroupResource{Resource: "services"}, path: "/api/v1/services", printed: true, minRows: 6},
		{gr: schema.GroupResource{Resource: "endpoints"}, path: "/api/v1/endpoints", printed: true, minRows: 3},
		{gr: schema.GroupResource{Resource: "configmaps"}, path: "/api/v1/configmaps", printed: true, minRows: 2},
		{gr: schema.GroupResource{Resource: "secrets"}, path: "/api/v1/secrets", printed: true, minRows: 3},
		{gr: schema.GroupResource{Resource: "namespaces"}, path: "/api/v1/namespaces", printed: true, minRows: 3},
		{gr: schema.GroupResource{Resource: "events"}, path: "/api/v1/events", printed: true, minRows: 3},
		{gr: schema.GroupResource{Resource: "serviceaccounts"}, path: "/api/v1/serviceaccounts", printed: true, minRows: 1},
		{gr: schema.GroupResource{Resource: "persistentvolumes"}, path: "/api/v1/persistentvolumes", printed: true, minRows: 3},
		{gr: schema.GroupResource{Resource: "persistentvolumeclaims"}, path: "/api/v1/persistentvolumeclaims", printed: true, minRows: 3},
		{gr: schema.GroupResource{Resource: "resourcequotas"}, path: "/api/v1/resourcequotas", printed: true, minRows: 2},
		{gr: schema.GroupResource{Resource: "componentstatuses"}, path: "/api/v1/componentstatuses", printed: true, minRows: 1},
		{gr: schema.GroupResource{Resource: "limitranges"}, path: "/api/v1/limitranges", printed: false, minRows: 1},
		{gr: schema.GroupResource{Resource: "podtemplates"}, path: "/api/v1/podtemplates", printed: true, minRows: 1},
		{gr: schema.GroupResource{Resource: "replicationcontrollers"}, path: "/api/v1/replicationcontrollers", printed: true, minRows: 1},
		{gr: schema.GroupResource{Group: "apps", Resource: "deployments"}, path: "/apis/apps/v1/deployments", printed: true, minRows: 2},
		{gr: schema.GroupResource{Group: "apps", Resource: "replicasets"}, path: "/apis/apps/v1/replicasets", printed: true, minRows: 2},
		{gr: schema.GroupResource{Group: "apps", Resource: "statefulsets"}, path: "/apis/apps/v1/statefulsets", printed: true, minRows: 2},
		{gr: schema.GroupResource{Group: "apps", Resource: "daemonsets"}, path: "/apis/apps/v1/daemonsets", printed: true, minRows: 2},
		{gr: schema.GroupResource{Group: "apps", Resource: "controllerrevisions"}, path: "/apis/apps/v1/controllerrevisions", printed: true, minRows: 2},
		{gr: schema.GroupResource{Group: "batch", Resource: "jobs"}, path: "/apis/batch/v1/jobs", printed: true, minRows: 5},
		{gr: schema.GroupResource{Group: "batch", Resource: "cronjobs"}, path: "/apis/batch/v1/cronjobs", printed: true, minRows: 2},
		{gr: schema.GroupResource{Group: "autoscaling", Resource: "horizontalpodautoscalers"}, path: "/apis/autoscaling/v2/horizontalpodautoscalers", printed: true, minRows: 3},
		{gr: schema.GroupResource{Group: "events.k8s.io", Resource: "events"}, path: "/apis/events.k8s.io/v1/events", printed: true, minRows: 3},
		{gr: schema.GroupResource{Group: "discovery.k8s.io", Resource: "endpointslices"}, path: "/apis/discovery.k8s.io/v1/endpointslices", printed: true, minRows: 2},
		{gr: schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}, path: "/apis/coordination.k8s.io/v1/leases", printed: true, minRows: 2},
		{gr: schema.GroupResource{Group: "policy", Resource: "poddisruptionbudgets"}, path: "/apis/policy/v1/poddisruptionbudgets", printed: true, minRows: 2},
		{gr: schema.GroupResource{Group: "scheduling.k8s.io", Resource: "priorityclasses"}, path: "/apis/scheduling.k8s.io/v1/priorityclasses", printed: true, minRows: 3},
		{gr: schema.GroupResource{Group: "node.k8s.io", Resource: "runtimeclasses"}, path: "/apis/node.k8s.io/v1/runtimeclasses", printed: true, minRows: 1},
		{gr: schema.GroupResource{Group: "networking.k8s.io", Resource: "ingresses"}, path: "/apis/networking.k8s.io/v1/ingresses", printed: true, minRows: 2},
		{gr: schema.GroupResource{Group: "networking.k8s.io", Resource: "ingressclasses"}, path: "/apis/networking.k8s.io/v1/ingressclasses", printed: true, minRows: 2},
		{gr: schema.GroupResource{Group: "networking.k8s.io", Resource: "networkpolicies"}, path: "/apis/networking.k8s.io/v1/networkpolicies", printed: true, minRows: 2},
		{gr: schema.GroupResource{Group: "networking.k8s.io", Resource: "servicecidrs"}, path: "/apis/networking.k8s.io/v1/servicecidrs", printed: true, minRows: 1},
		{gr: schema.GroupResource{Group: "networking.k8s.io", Resource: "ipaddresses"}, path: "/apis/networking.k8s.io/v1/ipaddresses", printed: true, minRows: 1},
		{gr: schema.GroupResource{Group: "rbac.authorization.k8s.io", Resource: "roles"}, path: "/apis/rbac.authorization.k8s.io/v1/roles", printed: false, minRows: 1},
		{gr: schema.GroupResource{Group: "rbac.authorization.k8s.io", Resource: "rolebindings"}, path: "/apis/rbac.authorization.k8s.io/v1/rolebindings", printed: true, minRows: 1},
		{gr: schema.GroupResource{Group: "rbac.authorization.k8s.io", Resource: "clusterroles"}, path: "/apis/rbac.authorization.k8s.io/v1/clusterroles", printed: false, minRows: 1},
		{gr: schema.GroupResource{Group: "rbac.authorization.k8s.io", Resource: "clusterrolebindings"}, path: "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", printed: true, minRows: 1},
		{gr: schema.GroupResource{Group: "storage.k8s.io", Resource: "storageclasses"}, path: "/apis/storage.k8s.io/v1/storageclasses", printed: true, minRows: 3},
		{gr: schema.GroupResource{Group: "storage.k8s.io", Resource: "volumeattributesclasses"}, path: "/apis/storage.k8s.io/v1/volumeattributesclasses", printed: true, minRows: 1},
		{gr: schema.GroupResource{Group: "storage.k8s.io", Resource: "volumeattachments"}, path: "/apis/storage.k8s.io/v1/volumeattachments", printed: true, minRows: 1},
		{gr: schema.GroupResource{Group: "storage.k8s.io", Resource: "csinodes"}, path: "/apis/storage.k8s.io/v1/csinodes", printed: true, minRows: 1},
		{gr: schema.GroupResource{Group: "storage.k8s.io", Resource: "csidrivers"}, path: "/apis/storage.k8s.io/v1/csidrivers", printed: true, minRows: 2},
		{gr: schema.GroupResource{Group: "storage.k8s.io", Resource: "csistoragecapacities"}, path: "/apis/storage.k8s.io/v1/csistoragecapacities", printed: false, minRows: 1},
		{gr: schema.GroupResource{Group: "admissionregistration.k8s.io", Resource: "mutatingwebhookconfigurations"}, path: "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations", printed: true, minRows: 1},
		{gr: schema.GroupResource{Group: "admissionregistration.k8s.io", Resource: "validatingwebhookconfigurations"}, path: "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations", printed: true, minRows: 1},
		{gr: schema.GroupResource{Group: "admissionregistration.k8s.io", Resource: "validatingadmissionpolicies"}, path: "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies", printed: true, minRows: 2},
		{gr: schema.GroupResource{Group: "admissionregistration.k8s.io", Resource: "validatingadmissionpolicybindings"}, path: "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings", printed: true, minRows: 3},
		{gr: schema.GroupResource{Group: "flowcontrol.apiserver.k8s.io", Resource: "flowschemas"}, path: "/apis/flowcontrol.apiserver.k8s.io/v1/flowschemas", printed: true, minRows: 5},
		{gr: schema.GroupResource{Group: "flowcontrol.apiserver.k8s.io", Resource: "prioritylevelconfigurations"}, path: "/apis/flowcontrol.apiserver.k8s.io/v1/prioritylevelconfigurations", printed: true, minRows: 3},
		{gr: schema.GroupResource{Group: "certificates.k8s.io", Resource: "certificatesigningrequests"}, path: "/apis/certificates.k8s.io/v1/certificatesigningrequests", printed: true, minRows: 3},
	}
}

// TestAgainstAPIServer creates objects of every type in several states in a
// real kube-apiserver, lists each type as a Table with the objects, and
// compares every column definition, cell and condition with what the
// printers compute from the rows' objects.
func TestAgainstAPIServer(t *testing.T) {
	seed(t)
	client, err := rest.HTTPClientFor(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range resourceCases() {
		t.Run(tc.gr.String(), func(t *testing.T) {
			p, ok := For(tc.gr)
			if ok != tc.printed {
				t.Fatalf("For(%s) = _, %v; kube-apiserver prints it with a printer: %v", tc.gr, ok, tc.printed)
			}
			if !ok {
				p = Default
			}
			table, date := getTable(t, client, tc.path)
			if len(table.Rows) < tc.minRows {
				t.Fatalf("kube-apiserver served %d rows, want at least %d: the seed did not create them", len(table.Rows), tc.minRows)
			}
			if diff := cmp.Diff(table.ColumnDefinitions, p.Columns()); diff != "" {
				t.Errorf("columns differ from kube-apiserver's (-served +ours):\n%s", diff)
			}
			items := make([][]byte, len(table.Rows))
			for i, r := range table.Rows {
				items[i] = r.Object
			}
			// The list as kube-apiserver prints it.
			compareRows(t, table.Rows, date, func(now time.Time) []metav1.TableRow {
				rows, err := p.List(items, now)
				if err != nil {
					t.Fatal(err)
				}
				return rows
			})
			// The rows of single objects, except where a row of a list
			// depends on the others (a default StorageClass's name).
			if tc.gr != (schema.GroupResource{Group: "storage.k8s.io", Resource: "storageclasses"}) {
				compareRows(t, table.Rows, date, func(now time.Time) []metav1.TableRow {
					rows := make([]metav1.TableRow, len(items))
					for i, item := range items {
						cells, conditions, err := p.Row(item, now)
						if err != nil {
							t.Fatal(err)
						}
						rows[i] = metav1.TableRow{Cells: cells, Conditions: conditions}
					}
					return rows
				})
			}
		})
	}
}

// TestListOrder checks that List sorts FlowSchemas as kube-apiserver does,
// whatever the order of the items.
func TestListOrder(t *testing.T) {
	client, err := rest.HTTPClientFor(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	table, date := getTable(t, client, "/apis/flowcontrol.apiserver.k8s.io/v1/flowschemas")
	items := make([][]byte, len(table.Rows))
	for i, r := range table.Rows {
		items[len(items)-1-i] = r.Object
	}
	p, _ := For(schema.GroupResource{Group: "flowcontrol.apiserver.k8s.io", Resource: "flowschemas"})
	compareRows(t, table.Rows, date, func(now time.Time) []metav1.TableRow {
		rows, err := p.List(items, now)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range rows {
			if !bytes.Equal(r.Object.Raw, table.Rows[i].Object) {
				t.Fatalf("row %d's object is not the one printed", i)
			}
		}
		return rows
	})
}

// TestSingleObject compares the Table of one object (a GET by name), which
// kube-apiserver prints without the context of a list.
func TestSingleObject(t *testing.T) {
	seed(t)
	client, err := rest.HTTPClientFor(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		gr   schema.GroupResource
		path string
	}{
		{name: "default storage class", gr: schema.GroupResource{Group: "storage.k8s.io", Resource: "storageclasses"}, path: "/apis/storage.k8s.io/v1/storageclasses/" + defaultStorageClass},
		{name: "crashlooping pod", gr: schema.GroupResource{Resource: "pods"}, path: fmt.Sprintf("/api/v1/namespaces/%s/pods/crashloop", seedNamespace)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			table, date := getTable(t, client, tc.path)
			p, _ := For(tc.gr)
			if len(table.Rows) != 1 {
				t.Fatalf("got %d rows, want 1", len(table.Rows))
			}
			compareRows(t, table.Rows, date, func(now time.Time) []metav1.TableRow {
				cells, conditions, err := p.Row(table.Rows[0].Object, now)
				if err != nil {
					t.Fatal(err)
				}
				return []metav1.TableRow{{Cells: cells, Conditions: conditions}}
			})
			if name := table.Rows[0].Cells[0]; !slices.Contains([]any{defaultStorageClass, "crashloop"}, name) {
				t.Errorf("name cell %v", name)
			}
		})
	}
}
