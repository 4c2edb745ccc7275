//go:build linux && (amd64 || arm64 || riscv64 || loong64 || ppc64le)

package store

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// aioOrSkip skips the test where this kernel gives no AIO context (an old
// kernel, a sandbox without io_setup, aio-max-nr reached): fdatasync then
// makes the plain call, which TestFdatasyncFallsBackToThePlainCall covers.
func aioOrSkip(t *testing.T) {
	t.Helper()
	a, err := newAIOSyncer()
	if err != nil {
		t.Skipf("no AIO context here: %v", err)
	}
	a.close()
}

// tempFile creates an empty file for the test to write and sync.
func tempFile(t *testing.T) *os.File {
	t.Helper()
	f, err := os.Create(filepath.Join(t.TempDir(), "f"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// TestAIOFdatasync: fdatasync by AIO succeeds, reuses its contexts, and
// reports a request the kernel refuses (a pipe has no fsync) as not
// started, so that the caller makes the plain call, whose error is the
// one the caller sees.
func TestAIOFdatasync(t *testing.T) {
	aioOrSkip(t)
	f := tempFile(t)
	free := max(len(aioSyncers), 1) // other tests may have left contexts
	for i := range 20 {
		if _, err := f.WriteAt(make([]byte, 4096), int64(i)*4096); err != nil {
			t.Fatal(err)
		}
		if err := aioFdatasync(f.Fd()); err != nil {
			t.Fatalf("sync %d: %v", i, err)
		}
	}
	if n := len(aioSyncers); n != free {
		t.Fatalf("%d free AIO contexts after one-at-a-time syncs, want %d (reused)", n, free)
	}

	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if err := aioFdatasync(w.Fd()); !errors.Is(err, errAIOUnavailable) {
		t.Fatalf("AIO fdatasync of a pipe: %v, want errAIOUnavailable", err)
	}
	if aioBroken.Load() {
		t.Fatal("a refused request turned AIO off for good")
	}
	err = fdatasync(w)
	if !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("fdatasync of a pipe: %v, want EINVAL from the plain call", err)
	}
}

// TestFdatasyncFallsBackToThePlainCall: once AIO is off, fdatasync still
// syncs.
func TestFdatasyncFallsBackToThePlainCall(t *testing.T) {
	aioBroken.Store(true)
	t.Cleanup(func() { aioBroken.Store(false) })
	f := tempFile(t)
	if _, err := f.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := fdatasync(f); err != nil {
		t.Fatal(err)
	}
	g := tempFile(t)
	g.Close()
	if err := fdatasync(g); err == nil {
		t.Fatal("fdatasync of a closed file succeeded")
	}
}

// TestFdatasyncLeavesTheProcessorFree: with one processor (GOMAXPROCS=1),
// another goroutine runs while a fdatasync waits for the disk. A plain
// fdatasync(2) keeps the processor until the runtime's monitor takes it
// back: with it, 14 to 23 of these 60 syncs saw no progress at all (six
// runs on this project's VM; the test allows 6). Syncs that take under
// 100 µs are not judged (the goroutine may not have parked yet; on tmpfs
// every sync is that fast, and the test is skipped).
func TestFdatasyncLeavesTheProcessorFree(t *testing.T) {
	aioOrSkip(t)
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	var ticks atomic.Int64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			ticks.Add(1)
			runtime.Gosched()
		}
	}()
	defer func() { close(stop); <-done }()

	f := tempFile(t)
	judged, stalled := 0, 0
	for i := 0; i < 400 && judged < 60; i++ {
		if _, err := f.WriteAt(make([]byte, 4096), int64(i%16)*4096); err != nil {
			t.Fatal(err)
		}
		before := ticks.Load()
		start := time.Now()
		if err := fdatasync(f); err != nil {
			t.Fatal(err)
		}
		if time.Since(start) < 100*time.Microsecond {
			continue
		}
		judged++
		if ticks.Load() == before {
			stalled++
		}
	}
	if judged < 10 {
		t.Skipf("only %d of the syncs took 100 µs or more (a memory file system?)", judged)
	}
	// A few may stall even so when the machine is loaded: the thread,
	// preempted between io_submit and the read of the eventfd, finds the
	// sync done (2 of 60 once, with the whole test suite running).
	if stalled > judged/10 {
		t.Fatalf("%d of %d fdatasyncs left no time to another goroutine", stalled, judged)
	}
}
