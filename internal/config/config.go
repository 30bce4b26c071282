// Package config reads and validates informerd's YAML configuration: which
// resources to cache, how to select and transform them, which indexes to
// build, and how much history to keep for watch resume.
package config

import (
	"errors"
	"fmt"
	"os"
	"time"

	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// Defaults for fields the file leaves out.
const (
	DefaultHistoryMaxEvents = 10000
	DefaultHistoryMaxAge    = 5 * time.Minute
	DefaultQueueLength      = 10000
)

// Config is the whole configuration file.
type Config struct {
	// Resources are the resource types to cache; at least one.
	Resources []Resource `json:"resources"`
	// Transform applies to every resource unless the resource overrides it.
	Transform Transform `json:"transform,omitempty"`
	// History bounds the per-resource event history used to resume watches.
	History History `json:"history,omitempty"`
	// QueueLength bounds each resource's delta queue between the reflector
	// and the cache; a full queue makes the reflector wait (backpressure).
	QueueLength int `json:"queueLength,omitempty"`
	// MTLSClients map client certificate identities to what they may read,
	// for --auth-mode=mtls.
	MTLSClients []MTLSClient `json:"mtlsClients,omitempty"`
	// ServesKubernetesAPI is set by the daemon, not the file, when
	// --kube-api-address is on: stripManagedFields then defaults to false.
	ServesKubernetesAPI bool `json:"-"`
}

// Resource selects one resource type to cache.
type Resource struct {
	// Resource is the kubectl-style name: "pods", "deployments.apps" or
	// "widgets.v1.example.com".
	Resource string `json:"resource"`
	// Namespace restricts the watch to one namespace; empty means all.
	Namespace string `json:"namespace,omitempty"`
	// LabelSelector and FieldSelector are passed to the API server.
	LabelSelector string `json:"labelSelector,omitempty"`
	FieldSelector string `json:"fieldSelector,omitempty"`
	// Indexes are built in addition to the "namespace" index every
	// resource has.
	Indexes []Index `json:"indexes,omitempty"`
	// Transform overrides the top-level transform for this resource.
	Transform *Transform `json:"transform,omitempty"`
	// UpstreamSelector is the part of the resource to take from an
	// upstream informerd (--upstream-informerd): informerd's gRPC Selector.
	// Only with an upstream informerd, which is asked for this part alone.
	UpstreamSelector *UpstreamSelector `json:"upstreamSelector,omitempty"`
}

// UpstreamSelector chooses the objects an upstream informerd sends, as its
// gRPC Selector does; every set part must match. Values may name
// environment variables as ${NAME}, expanded when the configuration is
// read: a DaemonSet's pod takes its node's part with
// values: ["${NODE_NAME}"].
type UpstreamSelector struct {
	// Namespace, when set, is the only namespace taken.
	Namespace string `json:"namespace,omitempty"`
	// LabelSelector narrows by labels ("app=web").
	LabelSelector string `json:"labelSelector,omitempty"`
	// Index takes the objects with any of the values in one of the
	// upstream's indexes for the resource.
	Index *IndexSelector `json:"index,omitempty"`
}

// IndexSelector names an upstream index and the values to take.
type IndexSelector struct {
	Name   string   `json:"name"`
	Values []string `json:"values"`
}

// Index computes index values from an object: either a label's value or the
// values of a JSONPath expression (which may yield several).
type Index struct {
	Name     string `json:"name"`
	JSONPath string `json:"jsonpath,omitempty"`
	Label    string `json:"label,omitempty"`
}

// Transform changes objects before they are cached.
type Transform struct {
	// StripManagedFields drops metadata.managedFields; when unset, true
	// unless the Kubernetes API is served (Config.ServesKubernetesAPI).
	StripManagedFields *bool `json:"stripManagedFields,omitempty"`
}

// History bounds the event history kept per resource.
type History struct {
	// MaxEvents is the most events kept; older ones are dropped first.
	MaxEvents int `json:"maxEvents,omitempty"`
	// MaxAge drops events older than this (e.g. "5m").
	MaxAge Duration `json:"maxAge,omitempty"`
}

// Duration is a time.Duration written as a Go duration string ("90s", "5m").
type Duration struct{ time.Duration }

// UnmarshalJSON reads a duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := yaml.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration must be a string such as \"5m\": %w", err)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("duration %q: %w", s, err)
	}
	d.Duration = v
	return nil
}

// MarshalJSON writes a duration string.
func (d Duration) MarshalJSON() ([]byte, error) {
	return []byte(`"` + d.String() + `"`), nil
}

// StripManagedFields reports whether managedFields are dropped for r: as
// configured for r, else at the top level, else unless the Kubernetes API
// is served. Clients of the Kubernetes API compare what they read with
// what their writes returned (the Conformance Watchers specs do), and
// those carry managedFields; gRPC clients rarely need them, and they are
// often half of an object's size.
func (c *Config) StripManagedFields(r Resource) bool {
	for _, t := range []*Transform{r.Transform, &c.Transform} {
		if t != nil && t.StripManagedFields != nil {
			return *t.StripManagedFields
		}
	}
	return !c.ServesKubernetesAPI
}

// Load reads, defaults and validates the configuration file at path.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	c, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	return c, nil
}

// Parse decodes YAML, rejecting unknown and duplicate fields and keys
// that differ from a field only in case (as kubectl's strict decoding
// does), then defaults and validates.
func Parse(data []byte) (*Config, error) {
	var c Config
	j, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return nil, fmt.Errorf("parse: %w", err)
	}
	strict, err := sigsjson.UnmarshalStrict(j, &c, sigsjson.DisallowUnknownFields, sigsjson.DisallowDuplicateFields)
	if err != nil {
		return nil, fmt.Errorf("parse: %w", err)
	}
	if len(strict) > 0 {
		return nil, fmt.Errorf("parse: %w (field names are case-sensitive; see docs/configuration.md)", errors.Join(strict...))
	}
	if err := c.expandEnv(os.LookupEnv); err != nil {
		return nil, err
	}
	c.setDefaults()
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

func (c *Config) setDefaults() {
	if c.History.MaxEvents == 0 {
		c.History.MaxEvents = DefaultHistoryMaxEvents
	}
	if c.History.MaxAge.Duration == 0 {
		c.History.MaxAge.Duration = DefaultHistoryMaxAge
	}
	if c.QueueLength == 0 {
		c.QueueLength = DefaultQueueLength
	}
}
