package main

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
)

// watchSamples is a scrape with n pod watches open and one series that
// must not count.
func watchSamples(n float64) samples {
	return samples{
		{Metric: model.Metric{model.MetricNameLabel: "apiserver_longrunning_requests", "resource": "pods", "verb": "WATCH"}, Value: model.SampleValue(n)},
		{Metric: model.Metric{model.MetricNameLabel: "apiserver_longrunning_requests", "resource": "configmaps", "verb": "WATCH"}, Value: 1000},
	}
}

func TestWaitRecovered(t *testing.T) {
	podWatches := map[string]string{"resource": "pods", "verb": "WATCH"}
	handshake := errors.New("net/http: TLS handshake timeout")
	tests := []struct {
		name    string
		scrapes []func() (samples, error) // the last one repeats
		limit   time.Duration
		wantErr string // "" for recovered
		calls   int    // scrapes made when recovered
	}{
		{
			name: "failed scrapes are retried until the watches are back",
			scrapes: []func() (samples, error){
				func() (samples, error) { return nil, handshake },
				func() (samples, error) { return watchSamples(1), nil },
				func() (samples, error) { return nil, handshake },
				func() (samples, error) { return watchSamples(2), nil },
			},
			limit: time.Minute,
			calls: 4,
		},
		{
			name:    "too few watches by the limit",
			scrapes: []func() (samples, error){func() (samples, error) { return watchSamples(1), nil }},
			limit:   20 * time.Millisecond,
			wantErr: "1 of 2 pod watches open again",
		},
		{
			name:    "no scrape succeeds by the limit",
			scrapes: []func() (samples, error){func() (samples, error) { return nil, handshake }},
			limit:   20 * time.Millisecond,
			wantErr: "its metrics could not be scraped: net/http: TLS handshake timeout",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			calls := 0
			scrape := func(context.Context) (samples, error) {
				f := tt.scrapes[min(calls, len(tt.scrapes)-1)]
				calls++
				return f()
			}
			err := waitRecovered(context.Background(), scrape, podWatches, 2, time.Now(), tt.limit, time.Millisecond)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("waitRecovered: %v, want recovered", err)
				}
				if calls != tt.calls {
					t.Errorf("%d scrapes, want %d", calls, tt.calls)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("waitRecovered: %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestWaitRecoveredCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	scrape := func(context.Context) (samples, error) { return watchSamples(0), nil }
	err := waitRecovered(ctx, scrape, map[string]string{"resource": "pods"}, 1, time.Now(), time.Hour, time.Hour)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("waitRecovered with a cancelled context: %v, want context.Canceled", err)
	}
}
