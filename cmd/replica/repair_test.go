package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/geoevent/geoevent/client"
	"github.com/geoevent/geoevent/io/store"

	"github.com/geoevent/geoevent/internal/testproc"
)

// TestClusterRepairsADamagedFollowerLog runs three replicas and writes all
// along, kills a follower with SIGKILL, flips a byte inside the data of an
// early record of its log (one with valid records after it: damage, not a
// torn write), and restarts it. The follower cuts its log before the
// damaged record, logs it, and is repaired by the leader while the writes
// go on, some of them through the follower's address alone (it forwards
// them while repairing). With the third replica killed, writes still commit
// (the repaired follower acknowledges). Then every acknowledged write is
// readable through the follower's address alone, its hard state no longer
// says Repairing, and the three logs on disk agree.
func TestClusterRepairsADamagedFollowerLog(t *testing.T) {
	testClusterRepairs(t, "damaged", damageEarlyRecord)
}

// TestClusterRepairsATruncatedFollowerLog: as above, but the follower's
// last segment is cut short, inside a record about a third of the way in:
// entries it had synced and acknowledged are gone, which is damage, not a
// torn write (the segment's header records how far it was synced). The
// follower cuts its log there and is repaired from its peers.
func TestClusterRepairsATruncatedFollowerLog(t *testing.T) {
	testClusterRepairs(t, "truncated", truncateTail)
}

func testClusterRepairs(t *testing.T, what string, damage func(t *testing.T, dir string) (seg string, off int64, index uint64)) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	c, leader := startedCluster(t, 3)
	follower := (leader + 1) % 3
	wl := &writeLog{acked: map[uint64]bool{}}
	opts := client.Options{RequestTimeout: time.Second, TotalTimeout: 5 * time.Second,
		BaseBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond, MaxRetries: 100}

	// Phase 1: writes through every address, with the follower up.
	stop := startWriters(ctx, c, wl, 1, 3, c.Addrs, opts)
	time.Sleep(1500 * time.Millisecond)
	stop()
	before := wl.ackedCount()
	if before == 0 {
		t.Fatal("no write was acknowledged before the kill")
	}

	c.Kill(follower)
	seg, off, index := damage(t, c.Dirs[follower])
	t.Logf("replica %d leads; killed follower %d after %d acknowledged batches and %s its log at entry %d, byte %d of %s",
		leader, follower, before, what, index, off, filepath.Base(seg))

	// Phase 2: writes while it is down (it misses them), then it restarts
	// and the writes go on, some through its address alone.
	stop = startWriters(ctx, c, wl, 2, 3, c.Addrs, opts)
	time.Sleep(500 * time.Millisecond)
	restartedAt := time.Now()
	c.Start(follower)
	viaFollower := &writeLog{acked: map[uint64]bool{}}
	stopVia := startWriters(ctx, c, viaFollower, 3, 1, []string{c.Addrs[follower]}, opts)
	time.Sleep(3 * time.Second)
	stopVia()
	stop()
	if n := viaFollower.ackedCount(); n == 0 {
		t.Fatalf("no write through the repairing follower's address was acknowledged (%d tried)", len(viaFollower.tried))
	}
	t.Logf("%d batches acknowledged in all, %d of them through follower %d's address alone after its restart (%d tried there)",
		wl.ackedCount()+viaFollower.ackedCount(), viaFollower.ackedCount(), follower, len(viaFollower.tried))

	// The repaired follower is a full member: with the third replica down,
	// writes commit with its acknowledgements.
	cur := c.Leader(-1, 10*time.Second)
	if cur < 0 {
		t.Fatal("no leader after the follower's restart")
	}
	victim := 0
	for victim == cur || victim == follower {
		victim++
	}
	c.Kill(victim)
	withoutVictim := &writeLog{acked: map[uint64]bool{}}
	stop = startWriters(ctx, c, withoutVictim, 4, 2, c.Addrs, opts)
	time.Sleep(time.Second)
	stop()
	if withoutVictim.ackedCount() == 0 {
		t.Fatalf("no write was acknowledged with replica %d down: leader %d and repaired follower %d make no quorum", victim, cur, follower)
	}
	t.Logf("with replica %d down, leader %d and follower %d acknowledged %d batches", victim, cur, follower, withoutVictim.ackedCount())
	c.Start(victim)
	time.Sleep(time.Second) // it catches up (the logs are compared at the end)

	// It logged the repair: the file, the offset, the index its log ends at.
	stderr := c.Procs[follower].Stderr()
	var line string
	for _, l := range strings.Split(stderr, "\n") {
		if strings.Contains(l, "cut the log before a damaged record") {
			line = l
		}
	}
	if line == "" || !strings.Contains(line, fmt.Sprintf("%q", seg)) || !strings.Contains(line, fmt.Sprintf(`"offset":%d`, off)) ||
		!strings.Contains(line, fmt.Sprintf(`"log_last":%d`, index-1)) {
		t.Fatalf("follower %d did not log the repair (file %s, offset %d, log_last %d); its log line: %q", follower, seg, off, index-1, line)
	}
	t.Logf("follower %d logged: %s", follower, line)

	// Every acknowledged batch is there, through the follower alone.
	cl := c.Client([]string{c.Addrs[follower]}, client.Options{TotalTimeout: 20 * time.Second})
	for _, w := range []*writeLog{wl, viaFollower, withoutVictim} {
		checkBatches(ctx, t, cl, w, fmt.Sprintf("follower %d (%s)", follower, c.Addrs[follower]))
	}
	t.Logf("every acknowledged batch is readable through follower %d, %v after its restart", follower, time.Since(restartedAt).Round(time.Millisecond))

	// Stop the followers, then the leader, and compare the logs on disk;
	// the follower's hard state says its repair is over.
	final := c.Leader(-1, 10*time.Second)
	for i, p := range c.Procs {
		if i != final {
			p.Stop(syscall.SIGTERM)
		}
	}
	if final >= 0 {
		c.Procs[final].Stop(syscall.SIGTERM)
	}
	hs, _, err := store.LoadHardState(c.Dirs[follower])
	if err != nil {
		t.Fatal(err)
	}
	if hs.Repairing {
		t.Fatalf("follower %d still repairing at the end: hard state %+v", follower, hs)
	}
	compareLogs(t, c.Dirs)
}

func (wl *writeLog) ackedCount() int {
	wl.mu.Lock()
	defer wl.mu.Unlock()
	return len(wl.acked)
}

// startWriters starts n goroutines writing batches through a client of
// addrs, until ctx is done or the returned function (which waits for them)
// is called. Batches of phase p and writer w start at entity p<<48|w<<40.
func startWriters(ctx context.Context, c *testproc.Cluster, wl *writeLog, phase uint64, n int, addrs []string, opts client.Options) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for w := range n {
		cl := c.Client(addrs, opts)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := uint64(0); ctx.Err() == nil; i++ {
				_ = wl.write(ctx, cl, phase<<48|uint64(w)<<40|i*clusterBatch+1)
			}
		}()
	}
	return func() { cancel(); wg.Wait() }
}

// truncateTail cuts the last log segment in dir inside the header of a
// record about a third of the way into it (one with records after it). It
// returns the segment, the record's offset and its index.
func truncateTail(t *testing.T, dir string) (seg string, off int64, index uint64) {
	t.Helper()
	seg, recs := segmentRecords(t, dir)
	if len(recs) < 3 {
		t.Fatalf("%s: %d records, want 3 or more", seg, len(recs))
	}
	r := recs[len(recs)/3]
	if err := os.Truncate(seg, r.off+store.RecordHeaderSize/2); err != nil {
		t.Fatal(err)
	}
	return seg, r.off, r.index
}

type segRecord struct {
	off   int64
	index uint64
	n     int
}

// segmentRecords returns the last log segment in dir and its records.
func segmentRecords(t *testing.T, dir string) (string, []segRecord) {
	t.Helper()
	segs, err := filepath.Glob(filepath.Join(dir, "log-*.seg"))
	if err != nil || len(segs) == 0 {
		t.Fatalf("no log segment in %s: %v", dir, err)
	}
	seg := segs[len(segs)-1]
	b, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	var recs []segRecord
	for p := store.SegmentHeaderSize; p < len(b); {
		e, n, err := store.DecodeRecord(b[p:])
		if err != nil {
			break // the runway, or a torn tail: the process was killed mid-write
		}
		recs = append(recs, segRecord{int64(p), e.Index, len(e.Data)})
		p += n
	}
	return seg, recs
}

// damageEarlyRecord flips a byte in the middle of the data of a record about
// a third of the way into the last log segment in dir (one with data, and
// with valid records after it), found by walking the records (package store's
// format: a segment header page of store.SegmentHeaderSize bytes, then
// records of a 24-byte header and their data). It returns the segment, the
// record's offset and its index.
func damageEarlyRecord(t *testing.T, dir string) (seg string, off int64, index uint64) {
	t.Helper()
	seg, recs := segmentRecords(t, dir)
	b, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	for k := len(recs) / 3; k < len(recs)-2; k++ {
		if r := recs[k]; r.n > 0 {
			b[r.off+store.RecordHeaderSize+int64(r.n/2)] ^= 0xff
			if err := os.WriteFile(seg, b, 0o644); err != nil {
				t.Fatal(err)
			}
			return seg, r.off, r.index
		}
	}
	t.Fatalf("%s: no record with data and records after it among %d", seg, len(recs))
	return "", 0, 0
}
