package main

import (
	"strings"
	"testing"
	"time"
)

// The byte progress line shows on a terminal only: the bytes, the rate and,
// with a known size, the share done; off a terminal nothing is drawn.
func TestByteProgress(t *testing.T) {
	var out strings.Builder
	p := newByteProgress(&out, true, "restoring")
	p.size = 4 << 20
	p.start = time.Now().Add(-time.Second)
	p.last = p.start
	p.update(2 << 20)
	p.finish()
	if got := out.String(); !strings.Contains(got, "restoring: 2.0 MiB, ") || !strings.Contains(got, "MiB/s") || !strings.Contains(got, " 50%") || !strings.HasSuffix(got, "\n") {
		t.Fatalf("progress line %q", got)
	}
	out.Reset()
	q := newByteProgress(&out, false, "backing up")
	q.update(1 << 20)
	q.finish()
	if out.Len() != 0 || q.n != 1<<20 {
		t.Fatalf("off a terminal: drew %q, counted %d", out.String(), q.n)
	}
}
