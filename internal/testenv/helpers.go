package testenv

import (
	"context"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"
	"k8s.io/apimachinery/pkg/util/wait"
)

// Runner is something with the Run(ctx) error shape of informerd's parts,
// such as a pipeline.Set.
type Runner interface {
	Run(ctx context.Context) error
}

// Run runs r in the background until the test ends: its cleanup cancels r,
// waits for Run to return and reports an error from it.
func Run(t testing.TB, r Runner) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := Receive(t, time.Minute, "Run to return after its context ended", done); err != nil {
			t.Errorf("Run: %v", err)
		}
	})
}

// Poll calls cond every 20ms until it is true or timeout passes, and
// reports whether it became true.
func Poll(timeout time.Duration, cond func() bool) bool {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return wait.PollUntilContextCancel(ctx, 20*time.Millisecond, true, func(context.Context) (bool, error) { return cond(), nil }) == nil
}

// Eventually is Poll that fails the test, naming what it waited for, when
// timeout passes first.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	if !Poll(timeout, cond) {
		t.Fatalf("timed out after %s waiting for %s", timeout, what)
	}
}

// Receive returns the next value from ch, or fails the test, naming what it
// waited for, when timeout passes first.
func Receive[T any](t testing.TB, timeout time.Duration, what string, ch <-chan T) T {
	t.Helper()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case v := <-ch:
		return v
	case <-timer.C:
		t.Fatalf("timed out after %s waiting for %s", timeout, what)
		var zero T
		return zero
	}
}

// Within calls f and waits for it to return, or fails the test, naming
// what it waited for, when timeout passes first (f then runs on).
func Within(t testing.TB, timeout time.Duration, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	Receive(t, timeout, what, done)
}

// DialBufconn returns a client connection, without TLS, to the gRPC server
// serving lis, closed when the test ends; opts are added to the dial's.
func DialBufconn(t testing.TB, lis *bufconn.Listener, opts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	opts = append([]grpc.DialOption{
		grpc.WithContextDialer(func(context.Context, string) (net.Conn, error) { return lis.Dial() }),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
	}, opts...)
	conn, err := grpc.NewClient("passthrough:///bufnet", opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}
