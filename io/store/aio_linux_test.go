//go:build linux && (amd64 || arm64 || riscv64 || loong64 || ppc64le)

package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
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
		if started, err := aioFdatasync(f.Fd()); !started || err != nil {
			t.Fatalf("sync %d: started %v, %v", i, started, err)
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
	started, err := aioFdatasync(w.Fd())
	var ae *aioError
	if started || !errors.As(err, &ae) || ae.call != "io_submit" {
		t.Fatalf("AIO fdatasync of a pipe: started %v, %v; want an io_submit refusal", started, err)
	}
	err = fdatasync(w)
	if !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("fdatasync of a pipe: %v, want EINVAL from the plain call", err)
	}
	if why := PlainSyncs(); why != nil {
		t.Fatalf("a file that cannot be synced at all turned AIO off: %v", why)
	}
}

// withAIOSetup makes setupAIO fail with errno (0: the real one again) and
// gives the test its own clock and a state with AIO on; it counts the
// calls to setupAIO.
func withAIOSetup(t *testing.T, errno *syscall.Errno, clock *time.Time) (calls *int) {
	t.Helper()
	calls = new(int)
	setupAIO = func() (*aioSyncer, error) {
		*calls++
		if *errno != 0 {
			return nil, &aioError{"io_setup", *errno}
		}
		return newAIOSyncer()
	}
	now = func() time.Time { return *clock }
	aioOff.Store(nil)
	// Empty the free contexts, so that every sync asks setupAIO for one.
	for len(aioSyncers) > 0 {
		(<-aioSyncers).close()
	}
	t.Cleanup(func() { setupAIO, now = newAIOSyncer, time.Now; aioOff.Store(nil) })
	return calls
}

// syncOK writes to f and fdatasyncs it, which must succeed whichever call
// it makes.
func syncOK(t *testing.T, f *os.File) {
	t.Helper()
	if _, err := f.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := fdatasync(f); err != nil {
		t.Fatal(err)
	}
}

// TestFdatasyncRetriesAIOAfterAShortage: when no AIO context can be had
// for a while (io_setup's EAGAIN: the system's aio-max-nr reached),
// fdatasync makes the plain call, says why, and tries AIO again only after
// aioRetryDelay; once AIO works, PlainSyncs is nil again.
func TestFdatasyncRetriesAIOAfterAShortage(t *testing.T) {
	aioOrSkip(t)
	errno := syscall.EAGAIN
	clock := time.Unix(1e9, 0)
	calls := withAIOSetup(t, &errno, &clock)
	f := tempFile(t)
	syncOK(t, f)
	why := PlainSyncs()
	if why == nil || !errors.Is(why, syscall.EAGAIN) || !strings.Contains(why.Error(), "io_setup") {
		t.Fatalf("PlainSyncs after io_setup's EAGAIN: %v", why)
	}
	clock = clock.Add(aioRetryDelay - time.Millisecond)
	syncOK(t, f)
	if *calls != 1 {
		t.Fatalf("%d io_setups before the retry delay was over, want 1", *calls)
	}
	clock = clock.Add(time.Millisecond)
	syncOK(t, f) // tries again, and is short again
	if *calls != 2 {
		t.Fatalf("%d io_setups once the delay was over, want 2", *calls)
	}
	if again := PlainSyncs(); again != why {
		t.Fatalf("the same shortage gave a new reason %v (was %v): a caller would log it again", again, why)
	}
	errno = 0
	clock = clock.Add(aioRetryDelay)
	syncOK(t, f)
	if why := PlainSyncs(); why != nil || *calls != 3 {
		t.Fatalf("once AIO contexts are to be had: PlainSyncs %v after %d io_setups, want nil after 3", why, *calls)
	}
}

// TestFdatasyncFallsBackToThePlainCall: on a kernel without AIO (ENOSYS)
// fdatasync makes the plain call for good, which still syncs and still
// reports a failure.
func TestFdatasyncFallsBackToThePlainCall(t *testing.T) {
	errno := syscall.ENOSYS
	clock := time.Unix(1e9, 0)
	calls := withAIOSetup(t, &errno, &clock)
	f := tempFile(t)
	syncOK(t, f)
	clock = clock.Add(100 * aioRetryDelay)
	syncOK(t, f)
	if *calls != 1 || !errors.Is(PlainSyncs(), syscall.ENOSYS) {
		t.Fatalf("without AIO: %d io_setups, PlainSyncs %v; want 1 and ENOSYS", *calls, PlainSyncs())
	}
	g := tempFile(t)
	g.Close()
	if err := fdatasync(g); err == nil {
		t.Fatal("fdatasync of a closed file succeeded")
	}
}

// TestAIOVerdict: what a refused AIO fdatasync means for the later ones.
func TestAIOVerdict(t *testing.T) {
	for _, c := range []struct {
		refused        error
		plainOK        bool
		retry, forGood bool
	}{
		{&aioError{"io_setup", syscall.EAGAIN}, true, true, false},
		{&aioError{"io_setup", syscall.ENOMEM}, true, true, false},
		{&aioError{"eventfd2", syscall.EMFILE}, true, true, false},
		{&aioError{"io_submit", syscall.EAGAIN}, true, true, false},
		{&aioError{"io_setup", syscall.ENOSYS}, true, false, true},
		{&aioError{"io_setup", syscall.EPERM}, false, false, true},
		{&aioError{"io_submit", syscall.EINVAL}, true, false, true},   // Linux before 4.18
		{&aioError{"io_submit", syscall.EINVAL}, false, false, false}, // a pipe
		{&aioError{"io_submit", syscall.EBADF}, false, false, false},
		{errors.New("no AIO request layout for this architecture"), true, false, true},
	} {
		retry, forGood := aioVerdict(c.refused, c.plainOK)
		if retry != c.retry || forGood != c.forGood {
			t.Errorf("aioVerdict(%v, plain call ok %v) = retry %v, for good %v; want %v, %v",
				c.refused, c.plainOK, retry, forGood, c.retry, c.forGood)
		}
	}
}

// TestFdatasyncLeavesTheProcessorFree: with one processor (GOMAXPROCS=1),
// another goroutine runs while a fdatasync waits for the disk. A plain
// fdatasync(2) keeps the processor until the runtime's monitor takes it
// back: with it, 14 to 23 of these 60 syncs saw no progress at all (six
// runs on this project's VM; the test allows 6, in one of three tries).
// Syncs that take under 100 µs are not judged (the goroutine may not have
// parked yet; on tmpfs every sync is that fast, and the test is skipped).
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
	measure := func() (judged, stalled int) {
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
		return judged, stalled
	}
	// A few may stall even so when the machine is loaded: the thread,
	// preempted between io_submit and the read of the eventfd, finds the
	// sync done (2 of 60 once, and 7 and 12 of 60 in a full test run on a
	// busy machine). Load comes and goes, a plain fdatasync stalls every
	// time: the test fails only when three measurements in a row do.
	var results []string
	for range 3 {
		judged, stalled := measure()
		if judged < 10 {
			t.Skipf("only %d of the syncs took 100 µs or more (a memory file system?)", judged)
		}
		if stalled <= judged/10 {
			return
		}
		results = append(results, fmt.Sprintf("%d of %d", stalled, judged))
	}
	t.Fatalf("fdatasyncs that left no time to another goroutine, three times: %v", results)
}
