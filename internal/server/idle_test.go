package server_test

import (
	"context"
	"io"
	"log/slog"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"

	pb "github.com/informerd/informerd/api/proto/informerd/v1"
	"github.com/informerd/informerd/internal/config"
	"github.com/informerd/informerd/internal/deltafifo"
	"github.com/informerd/informerd/internal/object"
	"github.com/informerd/informerd/internal/pipeline"
	"github.com/informerd/informerd/internal/server"
)

// clockedStream is a watchStream that also records when each response was
// sent.
type clockedStream struct {
	watchStream
	at []time.Time
}

func (s *clockedStream) SendMsg(m any) error {
	s.at = append(s.at, time.Now())
	return s.watchStream.SendMsg(m)
}

// TestIdleBookmark: a watch that allows bookmarks gets one, at the latest
// resourceVersion, when nothing was sent to it for 30s: counted from its
// last send, whatever else the cache did meanwhile, and only if the cache
// moved on since.
func TestIdleBookmark(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, err := config.Parse([]byte(`resources: [{resource: pods}]`))
		if err != nil {
			t.Fatal(err)
		}
		set, err := pipeline.NewSet(c, &rest.Config{Host: "http://127.0.0.1:1"}, slog.New(slog.NewTextHandler(io.Discard, nil)))
		if err != nil {
			t.Fatal(err)
		}
		ix := set.Served()[0].Cache()
		enc, err := object.NewEncoder(nil, true)
		if err != nil {
			t.Fatal(err)
		}
		rv := uint64(100)
		ix.Apply([]deltafifo.Delta{{Type: watch.Bookmark, ResourceVersion: "100", Synced: true}})
		change := func(app string) { // pod a/<app>, labelled app=<app>, at the next resourceVersion
			rv++
			o, err := enc.EncodeUnstructured(&unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Pod",
				"metadata": map[string]any{"namespace": "a", "name": app, "labels": map[string]any{"app": app}, "resourceVersion": strconv.FormatUint(rv, 10)}}})
			if err != nil {
				t.Fatal(err)
			}
			ix.Apply([]deltafifo.Delta{{Type: watch.Modified, Object: o, ResourceVersion: o.ResourceVersion}})
		}
		srv := server.New(set, server.Options{})
		defer srv.Stop()
		ctx, cancel := context.WithCancel(context.Background())
		stream := &clockedStream{watchStream: watchStream{ctx: ctx}}
		done := make(chan error)
		go func() {
			done <- srv.Watch(&pb.WatchRequest{Resource: "pods", Selector: &pb.Selector{Namespace: "a", LabelSelector: "app=web"}, AllowBookmarks: true}, stream)
		}()
		start := time.Now()
		synctest.Wait()

		change("db") // at 0s: not selected; the bookmark follows at 30s
		time.Sleep(40 * time.Second)
		change("web") // at 40s: sent at once
		time.Sleep(10 * time.Second)
		change("db")                  // at 50s: the next bookmark is due 30s after the last send, at 70s
		time.Sleep(100 * time.Second) // nothing new after 70s: no more bookmarks
		cancel()
		<-done

		type sent struct {
			At   time.Duration
			Type pb.EventType
			RV   string
		}
		var got []sent
		for i, r := range stream.sent {
			got = append(got, sent{stream.at[i].Sub(start), r.GetType(), r.GetResourceVersion()})
		}
		want := []sent{
			{30 * time.Second, pb.EventType_EVENT_TYPE_BOOKMARK, "101"},
			{40 * time.Second, pb.EventType_EVENT_TYPE_ADDED, "102"},
			{70 * time.Second, pb.EventType_EVENT_TYPE_BOOKMARK, "103"},
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("sent (-want +got):\n%s", diff)
		}
	})
}
