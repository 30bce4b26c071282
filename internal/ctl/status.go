package ctl

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/spf13/cobra"
)

// MetricsAddressEnv sets --metrics-address's default.
const MetricsAddressEnv = "INFORMERD_METRICS_ADDRESS"

// resourceStatus is one resource's line of `informerctl status`, from
// /metrics and /readyz.
type resourceStatus struct {
	Resource string `json:"resource"`
	// Phase is the pipeline's phase as /readyz reports it.
	Phase           string  `json:"phase,omitempty"`
	Synced          bool    `json:"synced"`
	ResourceVersion string  `json:"resourceVersion,omitempty"`
	Objects         float64 `json:"objects"`
	// StalenessSeconds: since the last event or bookmark from the API
	// server; well above 60 means the upstream watch is not flowing.
	StalenessSeconds *float64 `json:"stalenessSeconds,omitempty"`
	Relists          float64  `json:"relists"`
	WatchRestarts    float64  `json:"watchRestarts"`
	Expired          float64  `json:"expired"`
	UpstreamErrors   float64  `json:"upstreamErrors"`
	Watchers         float64  `json:"watchers"`
	MaxQueueDepth    float64  `json:"maxQueueDepth"`
	// OldestUndeliveredSeconds: the oldest change some Watch stream has
	// not been handed yet.
	OldestUndeliveredSeconds float64 `json:"oldestUndeliveredSeconds"`
	// Mean delays, over informerd's life, from the API server into the
	// cache and from the cache to the streams.
	IngestDelaySeconds   *float64 `json:"meanIngestDelaySeconds,omitempty"`
	DeliveryDelaySeconds *float64 `json:"meanDeliveryDelaySeconds,omitempty"`
	UpstreamProblem      string   `json:"upstreamProblem,omitempty"`
}

type statusReport struct {
	Ready     bool             `json:"ready"`
	Resources []resourceStatus `json:"resources"`
}

func newStatus(o *options) *cobra.Command {
	var format, address, caFile string
	def := os.Getenv(MetricsAddressEnv)
	if def == "" {
		def = "http://127.0.0.1:9402"
	}
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Summarize health and lag from informerd's metrics endpoint (/readyz and /metrics)",
		Long: `status reads /readyz and /metrics from informerd's metrics address and prints,
per resource: whether it synced, its resourceVersion and object count, how long
since the API server last sent anything (staleness), relists, watch restarts,
410s and errors upstream, open Watch streams, the longest queue and oldest
undelivered change among them, and the mean delays into the cache and out to
the streams. Problems /readyz names are printed below. The exit status is 1
when informerd is not ready.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkFormat(format, formatTable, formatJSON, formatYAML); err != nil {
				return err
			}
			base := address
			if !strings.Contains(base, "://") {
				base = "http://" + base
			}
			hc, err := httpClient(caFile, o.timeout)
			if err != nil {
				return err
			}
			rep, err := scrape(cmd.Context(), hc, strings.TrimSuffix(base, "/"))
			if err != nil {
				return err
			}
			if err := printStatus(o.out, format, rep); err != nil {
				return err
			}
			if !rep.Ready {
				return errors.New("informerd is not ready: not every resource has synced (see above)")
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&address, "metrics-address", def, "informerd's --metrics-address: host:port or URL (https:// if it serves TLS); $"+MetricsAddressEnv+" sets the default")
	cmd.Flags().StringVar(&caFile, "metrics-ca-file", "", "PEM CA bundle to verify an https metrics address with")
	addOutputFlag(cmd, &format, formatTable, formatJSON, formatYAML)
	return cmd
}

func httpClient(caFile string, timeout time.Duration) (*http.Client, error) {
	hc := &http.Client{Timeout: timeout}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("read --metrics-ca-file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--metrics-ca-file %s holds no PEM certificate", caFile)
		}
		hc.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}
	}
	return hc, nil
}

func get(ctx context.Context, hc *http.Client, url string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("cannot reach informerd's metrics endpoint (check --metrics-address): %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	return resp.StatusCode, body, err
}

// scrape reads /readyz and /metrics at base into a report.
func scrape(ctx context.Context, hc *http.Client, base string) (*statusReport, error) {
	readyCode, ready, err := get(ctx, hc, base+"/readyz")
	if err != nil {
		return nil, err
	}
	if readyCode != http.StatusOK && readyCode != http.StatusServiceUnavailable {
		return nil, fmt.Errorf("%s/readyz answered HTTP %d: is this informerd's metrics address?", base, readyCode)
	}
	code, metrics, err := get(ctx, hc, base+"/metrics")
	if err != nil {
		return nil, err
	}
	if code != http.StatusOK {
		return nil, fmt.Errorf("%s/metrics answered HTTP %d", base, code)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(string(metrics)))
	if err != nil {
		return nil, fmt.Errorf("%s/metrics: %w", base, err)
	}
	rep := &statusReport{Ready: readyCode == http.StatusOK}
	byName := map[string]*resourceStatus{}
	res := func(name string) *resourceStatus {
		r, ok := byName[name]
		if !ok {
			r = &resourceStatus{Resource: name}
			byName[name] = r
		}
		return r
	}
	for name, fam := range families {
		for _, m := range fam.GetMetric() {
			rname := label(m, "resource")
			if rname == "" {
				continue
			}
			r, v := res(rname), value(m)
			switch name {
			case "informerd_cache_synced":
				r.Synced = v == 1
			case "informerd_cache_resource_version":
				r.ResourceVersion = strconv.FormatFloat(v, 'f', 0, 64)
			case "informerd_cache_objects":
				r.Objects = v
			case "informerd_upstream_staleness_seconds":
				r.StalenessSeconds = &v
			case "informerd_upstream_relists_total":
				r.Relists = v
			case "informerd_upstream_watch_starts_total":
				r.WatchRestarts = max(v-1, 0)
			case "informerd_upstream_expired_total":
				r.Expired = v
			case "informerd_upstream_errors_total":
				r.UpstreamErrors = v
			case "informerd_watchers":
				r.Watchers = v
			case "informerd_watch_queue_depth_max":
				r.MaxQueueDepth = v
			case "informerd_watch_oldest_undelivered_seconds":
				r.OldestUndeliveredSeconds = v
			case "informerd_cache_ingest_delay_seconds":
				r.IngestDelaySeconds = mean(m)
			case "informerd_watch_delivery_delay_seconds":
				r.DeliveryDelaySeconds = mean(m)
			}
		}
	}
	if len(byName) == 0 {
		return nil, fmt.Errorf("%s/metrics has no informerd_ metrics: is this informerd's metrics address?", base)
	}
	for _, line := range strings.Split(string(ready), "\n") {
		name, rest, ok := strings.Cut(line, ": ")
		if !ok || name == "not ready" {
			continue
		}
		r := res(name)
		r.Phase, _, _ = strings.Cut(rest, " ")
		if _, problem, ok := strings.Cut(rest, "upstream-problem="); ok {
			if p, err := strconv.Unquote(problem); err == nil {
				problem = p
			}
			r.UpstreamProblem = problem
		}
	}
	for _, r := range byName {
		rep.Resources = append(rep.Resources, *r)
	}
	slices.SortFunc(rep.Resources, func(a, b resourceStatus) int { return strings.Compare(a.Resource, b.Resource) })
	return rep, nil
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

func value(m *dto.Metric) float64 {
	switch {
	case m.GetGauge() != nil:
		return m.GetGauge().GetValue()
	case m.GetCounter() != nil:
		return m.GetCounter().GetValue()
	case m.GetUntyped() != nil:
		return m.GetUntyped().GetValue()
	}
	return 0
}

func mean(m *dto.Metric) *float64 {
	h := m.GetHistogram()
	if h == nil || h.GetSampleCount() == 0 {
		return nil
	}
	v := h.GetSampleSum() / float64(h.GetSampleCount())
	return &v
}

func seconds(v float64) string {
	d := time.Duration(v * float64(time.Second))
	switch {
	case d >= time.Second:
		return d.Round(time.Second).String()
	case d >= time.Millisecond:
		return d.Round(time.Millisecond).String()
	}
	return d.Round(time.Microsecond).String()
}

func optSeconds(v *float64) string {
	if v == nil {
		return "-"
	}
	return seconds(*v)
}

func printStatus(w io.Writer, format string, rep *statusReport) error {
	if format != formatTable {
		return writeData(w, format, rep)
	}
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "RESOURCE\tPHASE\tSYNCED\tRESOURCEVERSION\tOBJECTS\tSTALENESS\tRELISTS\tWATCH-RESTARTS\t410s\tERRORS\tWATCHERS\tMAX-QUEUE\tOLDEST-UNDELIVERED\tINGEST(mean)\tDELIVERY(mean)")
	for _, r := range rep.Resources {
		fmt.Fprintf(tw, "%s\t%s\t%t\t%s\t%.0f\t%s\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\t%s\t%s\t%s\n",
			r.Resource, r.Phase, r.Synced, r.ResourceVersion, r.Objects, optSeconds(r.StalenessSeconds), r.Relists, r.WatchRestarts,
			r.Expired, r.UpstreamErrors, r.Watchers, r.MaxQueueDepth, seconds(r.OldestUndeliveredSeconds), optSeconds(r.IngestDelaySeconds), optSeconds(r.DeliveryDelaySeconds))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if rep.Ready {
		fmt.Fprintln(w, "\nready: every resource has synced")
	} else {
		fmt.Fprintln(w, "\nNOT READY: waiting for the first list of every resource")
	}
	for _, r := range rep.Resources {
		if r.UpstreamProblem != "" {
			fmt.Fprintf(w, "%s: upstream problem: %s\n", r.Resource, r.UpstreamProblem)
		}
	}
	return nil
}
