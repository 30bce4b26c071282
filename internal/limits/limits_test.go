package limits

import (
	"errors"
	"testing"
	"time"
)

func limitOf(err error) string {
	var e *Exceeded
	if errors.As(err, &e) {
		return e.Limit
	}
	return ""
}

func TestStartWatch(t *testing.T) {
	now := time.Unix(0, 0)
	l := New(Options{MaxWatchesPerIdentity: 2, WatchRate: 1, WatchBurst: 3, MaxIdentities: 2})
	l.now = func() time.Time { return now }

	r1, err := l.StartWatch("a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.StartWatch("a"); err != nil {
		t.Fatal(err)
	}
	if _, err := l.StartWatch("a"); limitOf(err) != MaxWatchesPerIdentity {
		t.Fatalf("third stream of a: got %v, want %s", err, MaxWatchesPerIdentity)
	}
	// Another identity is not affected by a's streams.
	rb, err := l.StartWatch("b")
	if err != nil {
		t.Fatalf("b: %v", err)
	}
	r1()
	r1() // release is idempotent
	// The refused call took a token too: a's burst of 3 is spent.
	if _, err := l.StartWatch("a"); limitOf(err) != WatchRate {
		t.Fatalf("a past its burst: got %v, want %s", err, WatchRate)
	}
	now = now.Add(time.Second)
	ra, err := l.StartWatch("a")
	if err != nil {
		t.Fatalf("a after a second: %v", err)
	}
	// Two identities tracked, both busy: a third is refused.
	if _, err := l.StartWatch("c"); limitOf(err) != MaxIdentities {
		t.Fatalf("c: got %v, want %s", err, MaxIdentities)
	}
	// b idle with a full bucket is forgotten to make room.
	rb()
	now = now.Add(10 * time.Second)
	if _, err := l.StartWatch("c"); err != nil {
		t.Fatalf("c after b went idle: %v", err)
	}
	if got := l.Identities(); got != 2 {
		t.Fatalf("tracked %d identities, want 2 (a and c)", got)
	}
	ra()
}
