package testrig

import (
	"context"
	"testing"
	"time"
)

func TestCPUSeconds(t *testing.T) {
	p := StartPostgres(t)
	before := p.CPUSeconds(t)

	// A live backend's time counts while it runs.
	conn := p.Connect(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var n int64
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM generate_series(1, 1000000) b WHERE md5(b::text) LIKE 'a%'").Scan(&n); err != nil {
		t.Fatalf("CPU-heavy query: %v", err)
	}
	live := p.CPUSeconds(t)
	if live-before <= 0.2 {
		t.Errorf("a CPU-heavy query on a live backend raised CPUSeconds by %.2fs (%.2f → %.2f), want > 0.2", live-before, before, live)
	}

	// Once the backend exits and is reaped its time stays counted (in the
	// postmaster's cutime, cstime).
	if err := conn.Close(ctx); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	var after float64
	for {
		after = p.CPUSeconds(t)
		if after >= live-0.05 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if after-before <= 0.2 {
		t.Errorf("after the backend exited CPUSeconds is %.2fs above the start (%.2f → %.2f), want > 0.2: an exited backend's time was lost", after-before, before, after)
	}
	t.Logf("CPUSeconds: %.2f at start, %.2f with the busy backend live, %.2f after it exited", before, live, after)
}
