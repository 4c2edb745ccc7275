package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	bin "encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/geoevent/geoevent/client"
	"github.com/geoevent/geoevent/core"

	"github.com/geoevent/geoevent/internal/testproc"
)

// TestBackupUnderLoadAndRestore backs up a running `replica dev` with
// `replica backup` while writers insert (a fleet of entities reporting in
// turn, so each has a history of several events), restores the backup
// into a new directory with `replica restore` and serves it: every event
// acknowledged before the backup began is there. A second backup, once the
// writers have stopped, restores to the same state as the running
// replica's: the digest of every entity's history and latest position is
// equal. A damaged or cut backup file is refused with a clear message and
// creates no directory.
func TestBackupUnderLoadAndRestore(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	const fleet, batch, workers = 200, 100, 2
	tmp := t.TempDir()
	data := filepath.Join(tmp, "data")
	srv := testproc.StartDev(t, testproc.DevOptions{Dir: data})
	cl := srv.Client(devClientOptions)

	var (
		mu    sync.Mutex
		acked = map[uint64]bool{} // the sequence numbers of acknowledged events
		next  atomic.Uint64
	)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for ctx.Err() == nil {
				first := next.Add(batch) - batch
				evs := make([]core.GeoEvent, batch)
				for j := range evs {
					seq := first + uint64(j)
					evs[j] = core.GeoEvent{EntityID: core.Uint128{Hi: 9, Lo: 1 + seq%fleet}, UserData: core.Uint128{Lo: seq},
						LatNano: 48_100_000_000 + int64(seq%1000)*1000, LonNano: 11_500_000_000}
				}
				if r, err := cl.Insert(ctx, evs); err == nil && r.Committed {
					mu.Lock()
					for j := range uint64(batch) {
						acked[first+j] = true
					}
					mu.Unlock()
				}
			}
		})
	}
	for deadline := time.Now().Add(10 * time.Second); next.Load() < 20*fleet && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	mu.Lock()
	before := make([]uint64, 0, len(acked))
	for seq := range acked {
		before = append(before, seq)
	}
	mu.Unlock()
	file := filepath.Join(tmp, "during.backup")
	code, stdout, stderr := runCmd(t, "backup", "--data", data, "--to", file)
	if code != 0 || !strings.Contains(stdout, "from the running replica") {
		t.Fatalf("replica backup: exit %d\n%s%s", code, stdout, stderr)
	}
	cancel()
	wg.Wait()
	if len(before) < 2*fleet {
		t.Fatalf("only %d events acknowledged before the backup: the test proves little", len(before))
	}

	r1, c1 := restoreAndServe(t, file, filepath.Join(tmp, "restored"))
	seen := map[uint64]bool{}
	histories(t, c1, fleet, func(e core.GeoEvent) { seen[e.UserData.Lo] = true })
	for _, seq := range before {
		if !seen[seq] {
			t.Fatalf("event %d was acknowledged before the backup began but is not in the restored replica", seq)
		}
	}
	t.Logf("%d events acknowledged before the backup, %d restored, %d acknowledged in all", len(before), len(seen), len(acked))
	r1.Stop(syscall.SIGTERM)

	// Quiet now: a backup restores the running replica's state exactly;
	// once the replica has stopped, replica backup reads its directory.
	want := digest(t, cl, fleet)
	for _, stopped := range []bool{false, true} {
		if stopped {
			srv.Stop(syscall.SIGTERM)
		}
		file2 := filepath.Join(tmp, fmt.Sprintf("quiet-%v.backup", stopped))
		code, stdout, stderr := runCmd(t, "backup", "--data", data, "--to", file2)
		if code != 0 || stopped != strings.Contains(stdout, "from the stopped replica's files") {
			t.Fatalf("replica backup (stopped: %v): exit %d\n%s%s", stopped, code, stdout, stderr)
		}
		_, c2 := restoreAndServe(t, file2, filepath.Join(tmp, fmt.Sprintf("restored-%v", stopped)))
		if got := digest(t, c2, fleet); got != want {
			t.Fatalf("stopped %v: the restored replica's digest %x differs from the replica's %x", stopped, got, want)
		}
		file = file2
	}

	// Damaged copies are refused, and create nothing.
	good, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	flipped := bytes.Clone(good)
	flipped[bytes.Index(good, []byte("replica-count"))+1] ^= 0x20
	for name, b := range map[string][]byte{"flipped": flipped, "cut": good[:len(good)/2]} {
		bad := filepath.Join(tmp, name+".backup")
		if err := os.WriteFile(bad, b, 0o644); err != nil {
			t.Fatal(err)
		}
		target := filepath.Join(tmp, "from-"+name)
		code, _, stderr := runCmd(t, "restore", "--from", bad, "--data", target)
		if code != 1 || !strings.Contains(stderr, "not a whole GeoEvent backup") || !strings.Contains(stderr, "nothing was restored into") {
			t.Fatalf("%s: replica restore: exit %d\n%s", name, code, stderr)
		}
		if _, err := os.Stat(target); !os.IsNotExist(err) {
			t.Fatalf("%s: %s exists after a refused restore", name, target)
		}
		t.Logf("%s: %s", name, strings.TrimSpace(stderr))
	}
	leftovers, _ := filepath.Glob(filepath.Join(tmp, ".*"))
	if len(leftovers) != 0 {
		t.Fatalf("temporary files left: %v", leftovers)
	}
}

// restoreAndServe restores the backup file into dir with replica restore
// and serves it with replica dev.
func restoreAndServe(t *testing.T, file, dir string) (*testproc.Dev, *client.Client) {
	t.Helper()
	if code, stdout, stderr := runCmd(t, "restore", "--from", file, "--data", dir); code != 0 {
		t.Fatalf("replica restore: exit %d\n%s%s", code, stdout, stderr)
	}
	c := testproc.StartDev(t, testproc.DevOptions{Dir: dir})
	return c, c.Client(devClientOptions)
}

// histories pages through the history of entities 1..fleet (Hi 9).
func histories(t *testing.T, cl *client.Client, fleet uint64, each func(core.GeoEvent)) {
	t.Helper()
	for id := uint64(1); id <= fleet; id++ {
		q := core.HistoryQuery{EntityID: core.Uint128{Hi: 9, Lo: id}, Page: core.Page{Limit: 1000}}
		for {
			page, err := cl.History(context.Background(), &q)
			if err != nil {
				t.Fatalf("history of entity %d: %v", id, err)
			}
			for _, e := range page.Events {
				each(e)
			}
			if !page.HasMore {
				break
			}
			q.Cursor = page.Cursor
		}
	}
}

// digest is a SHA-256 over every entity's history and latest position.
func digest(t *testing.T, cl *client.Client, fleet uint64) [32]byte {
	t.Helper()
	h := sha256.New()
	put := func(e core.GeoEvent) {
		var b [8]byte
		for _, v := range []uint64{e.EntityID.Hi, e.EntityID.Lo, e.UserData.Lo, e.TimestampNS, uint64(e.LatNano), uint64(e.LonNano)} {
			bin.LittleEndian.PutUint64(b[:], v)
			h.Write(b[:])
		}
	}
	histories(t, cl, fleet, put)
	for id := uint64(1); id <= fleet; id++ {
		r, err := cl.GetLatest(context.Background(), core.Uint128{Hi: 9, Lo: id})
		if err != nil {
			t.Fatalf("latest of entity %d: %v", id, err)
		}
		put(r.Event)
	}
	var sum [32]byte
	h.Sum(sum[:0])
	return sum
}
