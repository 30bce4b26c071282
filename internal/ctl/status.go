package ctl

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/spf13/cobra"

	"github.com/informerd/informerd/internal/health"
)

// MetricsAddressEnv sets --metrics-address's default.
const MetricsAddressEnv = "INFORMERD_METRICS_ADDRESS"

// resourceStatus is one resource's line of `informerctl status`: what
// /readyz reports, and what only /metrics has.
type resourceStatus struct {
	health.Resource
	Watchers      float64 `json:"watchers"`
	MaxQueueDepth float64 `json:"maxQueueDepth"`
	// OldestUndeliveredSeconds: the oldest change some Watch stream has
	// not been handed yet.
	OldestUndeliveredSeconds float64 `json:"oldestUndeliveredSeconds"`
	// Mean delays, over informerd's life, from the API server into the
	// cache and from the cache to the streams.
	IngestDelaySeconds   *float64 `json:"meanIngestDelaySeconds,omitempty"`
	DeliveryDelaySeconds *float64 `json:"meanDeliveryDelaySeconds,omitempty"`
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
		Short: "Summarize health and lag from informerd's metrics address (/readyz and /metrics)",
		Long: `status reads /readyz (as JSON) and /metrics from informerd's metrics address
and prints, per resource: its phase, whether it synced, its resourceVersion and
object count, how long since the API server last sent anything (staleness),
relists, watch restarts, 410s and errors upstream, open Watch streams, the
longest queue and oldest undelivered change among them, and the mean delays
into the cache and out to the streams. Upstream problems are printed below.
The exit status is 1 when informerd is not ready.`,
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

// get fetches url, asking for the media type accept if it is set, and
// returns the status code, the content type and the body.
func get(ctx context.Context, hc *http.Client, url, accept string) (int, string, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, "", nil, err
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, "", nil, fmt.Errorf("cannot reach informerd's metrics endpoint (check --metrics-address): %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	return resp.StatusCode, resp.Header.Get("Content-Type"), body, err
}

// scrape reads /readyz and /metrics at base into a report.
func scrape(ctx context.Context, hc *http.Client, base string) (*statusReport, error) {
	ready, err := readyz(ctx, hc, base)
	if err != nil {
		return nil, err
	}
	code, _, metrics, err := get(ctx, hc, base+"/metrics", "")
	if err != nil {
		return nil, err
	}
	if code != http.StatusOK {
		return nil, fmt.Errorf("%s/metrics answered HTTP %d", base, code)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(metrics))
	if err != nil {
		return nil, fmt.Errorf("%s/metrics: %w", base, err)
	}
	rep := &statusReport{Ready: ready.Ready}
	// Metrics label a resource as /readyz's "resource" names it.
	byName := map[string]*resourceStatus{}
	for _, r := range ready.Resources {
		rep.Resources = append(rep.Resources, resourceStatus{Resource: r})
	}
	for i := range rep.Resources {
		byName[rep.Resources[i].Resource.Resource] = &rep.Resources[i]
	}
	for name, fam := range families {
		for _, m := range fam.GetMetric() {
			r, ok := byName[label(m, "resource")]
			if !ok {
				continue
			}
			switch v := value(m); name {
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
	slices.SortFunc(rep.Resources, func(a, b resourceStatus) int { return strings.Compare(a.Resource.Resource, b.Resource.Resource) })
	return rep, nil
}

// readyz reads /readyz's JSON report.
func readyz(ctx context.Context, hc *http.Client, base string) (*health.Report, error) {
	code, contentType, body, err := get(ctx, hc, base+"/readyz?format=json", "application/json")
	if err != nil {
		return nil, err
	}
	if code != http.StatusOK && code != http.StatusServiceUnavailable {
		return nil, fmt.Errorf("%s/readyz answered HTTP %d: is this informerd's metrics address?", base, code)
	}
	if mt, _, _ := mime.ParseMediaType(contentType); mt != "application/json" {
		return nil, fmt.Errorf("%s/readyz answered %q, not JSON: is this informerd's metrics address, of an informerd as new as this informerctl?", base, contentType)
	}
	var rep health.Report
	if err := json.Unmarshal(body, &rep); err != nil {
		return nil, fmt.Errorf("%s/readyz: %w", base, err)
	}
	return &rep, nil
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
		var up health.Upstream // zero until the resource is resolved
		if r.Upstream != nil {
			up = *r.Upstream
		}
		fmt.Fprintf(tw, "%s\t%s\t%t\t%s\t%d\t%s\t%d\t%d\t%d\t%d\t%.0f\t%.0f\t%s\t%s\t%s\n",
			r.Resource.Resource, r.Phase, r.Synced, r.ResourceVersion, r.Objects, optSeconds(r.StalenessSeconds), up.Relists, max(up.WatchStarts-1, 0),
			up.Expired, up.Errors, r.Watchers, r.MaxQueueDepth, seconds(r.OldestUndeliveredSeconds), optSeconds(r.IngestDelaySeconds), optSeconds(r.DeliveryDelaySeconds))
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
			fmt.Fprintf(w, "%s: upstream problem: %s\n", r.Resource.Resource, r.UpstreamProblem)
		}
	}
	return nil
}
