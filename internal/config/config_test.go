package config

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"sigs.k8s.io/yaml"

	"github.com/informerd/informerd/internal/object"
)

func TestParseValid(t *testing.T) {
	f := false
	tests := []struct {
		name string
		yaml string
		want *Config
	}{
		{
			name: "the documented example",
			yaml: `
resources:
  - resource: pods
    indexes:
      - name: node
        jsonpath: "{.spec.nodeName}"
      - name: app
        label: app
  - resource: configmaps
    namespace: default
    labelSelector: "team=a"
    transform:
      stripManagedFields: false
  - resource: widgets.v1.example.com
history:
  maxEvents: 500
  maxAge: 90s
`,
			want: &Config{
				Resources: []Resource{
					{Resource: "pods", Indexes: []Index{{Name: "node", JSONPath: "{.spec.nodeName}"}, {Name: "app", Label: "app"}}},
					{Resource: "configmaps", Namespace: "default", LabelSelector: "team=a", Transform: &Transform{StripManagedFields: &f}},
					{Resource: "widgets.v1.example.com"},
				},
				History:     History{MaxEvents: 500, MaxAge: Duration{90 * time.Second}},
				QueueLength: DefaultQueueLength,
			},
		},
		{
			name: "defaults",
			yaml: "resources: [{resource: deployments.apps}]",
			want: &Config{
				Resources:   []Resource{{Resource: "deployments.apps"}},
				History:     History{MaxEvents: DefaultHistoryMaxEvents, MaxAge: Duration{DefaultHistoryMaxAge}},
				QueueLength: DefaultQueueLength,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse([]byte(tt.yaml))
			if err != nil {
				t.Fatalf("Parse() error = %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Parse() (-want +got):\n%s", diff)
			}
		})
	}
}

func TestStripManagedFields(t *testing.T) {
	c, err := Parse([]byte(`
transform: {stripManagedFields: false}
resources:
  - resource: pods
  - resource: secrets
    transform: {stripManagedFields: true}
`))
	if err != nil {
		t.Fatal(err)
	}
	if c.StripManagedFields(c.Resources[0]) {
		t.Error("pods: top-level stripManagedFields=false ignored")
	}
	if !c.StripManagedFields(c.Resources[1]) {
		t.Error("secrets: per-resource override ignored")
	}
	if (&Config{ServesKubernetesAPI: true}).StripManagedFields(Resource{}) {
		t.Error("unset, with the Kubernetes API served: managedFields stripped, want kept")
	}
	if !(&Config{ServesKubernetesAPI: true, Transform: Transform{StripManagedFields: new(true)}}).StripManagedFields(Resource{}) {
		t.Error("stripManagedFields: true with the Kubernetes API served: kept, want stripped")
	}
	if !(&Config{}).StripManagedFields(Resource{}) {
		t.Error("default must strip managedFields")
	}
}

func TestParseInvalid(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		// every substring must appear in the error
		want []string
	}{
		{name: "empty", yaml: "", want: []string{"resources: Required value"}},
		{name: "unknown field", yaml: "resources: [{resource: pods, nmespace: x}]", want: []string{`unknown field "resources[0].nmespace"`}},
		{name: "field in another case", yaml: "resources: [{resource: pods, Resource: secrets}]", want: []string{`unknown field "resources[0].Resource"`, "case-sensitive"}},
		{name: "duplicate key", yaml: "resources: [{resource: pods}]\nresources: [{resource: secrets}]", want: []string{`"resources" already set`}},
		{name: "upper case resource", yaml: "resources: [{resource: Pods}]", want: []string{"resources[0].resource", "lower case"}},
		{name: "bad resource shape", yaml: "resources: [{resource: 'pods..apps'}]", want: []string{"resources[0].resource", "<plural>.<group>"}},
		{name: "duplicate resource", yaml: "resources: [{resource: pods}, {resource: pods}]", want: []string{"resources[1].resource: Duplicate value", "resources[0]"}},
		{name: "bad namespace", yaml: "resources: [{resource: pods, namespace: Default}]", want: []string{"resources[0].namespace"}},
		{name: "bad label selector", yaml: "resources: [{resource: pods, labelSelector: 'a=('}]", want: []string{"resources[0].labelSelector"}},
		{name: "bad field selector", yaml: "resources: [{resource: pods, fieldSelector: 'a'}]", want: []string{"resources[0].fieldSelector"}},
		{name: "index without source", yaml: "resources: [{resource: pods, indexes: [{name: x}]}]", want: []string{"resources[0].indexes[0]", "jsonpath", "label"}},
		{name: "index with two sources", yaml: "resources: [{resource: pods, indexes: [{name: x, label: a, jsonpath: '{.a}'}]}]", want: []string{"only one of"}},
		{name: "bad jsonpath", yaml: "resources: [{resource: pods, indexes: [{name: x, jsonpath: '{.a['}]}]", want: []string{"resources[0].indexes[0].jsonpath"}},
		{name: "bad label key", yaml: "resources: [{resource: pods, indexes: [{name: x, label: 'a b'}]}]", want: []string{"resources[0].indexes[0].label"}},
		{name: "reserved index", yaml: "resources: [{resource: pods, indexes: [{name: namespace, label: a}]}]", want: []string{"built in"}},
		{name: "duplicate index", yaml: "resources: [{resource: pods, indexes: [{name: x, label: a}, {name: x, label: b}]}]", want: []string{"resources[0].indexes[1].name: Duplicate"}},
		{name: "bad duration", yaml: "resources: [{resource: pods}]\nhistory: {maxAge: soon}", want: []string{"duration", "soon"}},
		{name: "negative history", yaml: "resources: [{resource: pods}]\nhistory: {maxEvents: -1}", want: []string{"history.maxEvents"}},
		{
			name: "every error at once",
			yaml: "resources: [{resource: Pods}, {resource: cm, namespace: X}]",
			want: []string{"resources[0].resource", "resources[1].namespace"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.yaml))
			if err == nil {
				t.Fatal("Parse() error = nil, want an error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Parse() error = %q, want it to contain %q", err, w)
				}
			}
		})
	}
}

func TestLoadNamesFile(t *testing.T) {
	_, err := Load("testdata/does-not-exist.yaml")
	if err == nil || !strings.Contains(err.Error(), "does-not-exist.yaml") {
		t.Fatalf("Load() error = %v, want one naming the file", err)
	}
}

// FuzzParse checks that no input makes Parse panic, and that whatever it
// accepts is defaulted, valid, buildable (object.NewEncoder takes its indexes,
// as the pipeline will) and survives a write and a second Parse unchanged.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"resources: [{resource: pods, indexes: [{name: node, jsonpath: '{.spec.nodeName}'}]}]",
		"resources: [{resource: configmaps, namespace: default, labelSelector: 'team in (a,b)'}]\nhistory: {maxAge: 1m}",
		"resources: [{resource: widgets.v1.example.com, indexes: [{name: img, jsonpath: '{.spec.containers[*].image}'}]}]",
		"resources: [{resource: pods, fieldSelector: 'spec.nodeName=n1', indexes: [{name: app, label: app.kubernetes.io/name}]}]\n" +
			"transform: {stripManagedFields: false}\nqueueLength: 5\nhistory: {maxEvents: 1, maxAge: 1h30m}",
		"resources: [{resource: pods, transform: {stripManagedFields: true}, indexes: [{name: c, jsonpath: '{range .status.conditions[*]}{.type}{end}'}]}]",
		// Rejected ones.
		"",
		"resources: []",
		"resources: [{resource: Pods}]",
		"resources: [{resource: pods}, {resource: pods}]",
		"resources: [{resource: pods, indexes: [{name: namespace, label: a}]}]",
		"resources: [{resource: pods, indexes: [{name: x, jsonpath: '{.a['}]}]",
		"resources: [{resource: pods, labelSelector: 'a in ('}]",
		"resources: [{resource: pods}]\nhistory: {maxAge: -1s, maxEvents: -1}",
		"resources: [{resource: pods}]\nhistory: {maxAge: 5}",
		"resources: [{resource: pods, nmespace: x}]",
		"{",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(data)
		if err != nil {
			if c != nil {
				t.Fatalf("Parse() = %+v and error %v; want nil with an error", c, err)
			}
			return
		}
		if len(c.Resources) == 0 {
			t.Fatal("accepted a config without resources")
		}
		if c.History.MaxEvents <= 0 || c.History.MaxAge.Duration <= 0 || c.QueueLength <= 0 {
			t.Fatalf("accepted config is not defaulted: history %+v, queueLength %d", c.History, c.QueueLength)
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("accepted config fails validation: %v", err)
		}
		for _, r := range c.Resources {
			specs := make([]object.IndexSpec, 0, len(r.Indexes))
			for _, ix := range r.Indexes {
				specs = append(specs, object.IndexSpec{Name: ix.Name, Label: ix.Label, JSONPath: ix.JSONPath})
			}
			enc, err := object.NewEncoder(specs, c.StripManagedFields(r))
			if err != nil {
				t.Fatalf("accepted resource %q, but its indexes cannot be built: %v", r.Resource, err)
			}
			if names := enc.IndexNames(); len(names) != len(r.Indexes)+1 || names[0] != NamespaceIndex {
				t.Fatalf("resource %q: index names %v, want namespace and the %d configured", r.Resource, names, len(r.Indexes))
			}
		}
		out, err := yaml.Marshal(c)
		if err != nil {
			t.Fatalf("cannot write accepted config %+v: %v", c, err)
		}
		again, err := Parse(out)
		if err != nil {
			t.Fatalf("accepted config, written back as\n%s\nis rejected: %v", out, err)
		}
		// An empty list and a missing one mean the same.
		if diff := cmp.Diff(c, again, cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("config changed in a write and re-Parse (-first +second):\n%s\nwritten:\n%s", diff, out)
		}
	})
}
