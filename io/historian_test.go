package io

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/geoevent/geoevent/core"
)

// history reads entity i's whole history (one page of up to 1,000).
func (c *rawClient) history(i int) []core.GeoEvent {
	c.t.Helper()
	r := c.call(core.OpEntityHistory, &core.HistoryQuery{EntityID: entity(i), Page: core.Page{Limit: core.MaxQueryLimit}}).(*core.QueryResult)
	return r.Events
}

// A server's older events are in its history store on disk: they survive
// restarts, recovered from the snapshot's history checkpoint and the log
// above it, and imports between stored events (which read the store
// before they write) are told from duplicates after a restart too.
func TestHistorySurvivesRestarts(t *testing.T) {
	dir := formatDir(t)
	opts := Options{}
	opts.Replica.SnapshotEvery = 7 // snapshots, and entries after the last
	s := serve(t, dir, opts)
	c := dial(t, s.Addr())
	c.register(testCluster)
	const entities, rounds = 3, 20
	for r := range rounds {
		for i := range entities {
			ev := event(i)
			ev.LatNano += int64(r)
			c.insert(ev)
		}
	}
	want := make([][]core.GeoEvent, entities)
	for i := range entities {
		want[i] = c.history(i)
		if len(want[i]) != rounds {
			t.Fatalf("entity %d has %d events, want %d", i, len(want[i]), rounds)
		}
	}
	s.stop(t)
	cps, _ := filepath.Glob(filepath.Join(dir, "snapshot-*.history"))
	if len(cps) == 0 {
		t.Fatal("no history checkpoint beside the snapshots")
	}

	for restart := range 2 {
		s = serve(t, dir, opts)
		c = dial(t, s.Addr())
		c.register(testCluster)
		for i := range entities {
			got := c.history(i)
			if len(got) != len(want[i]) {
				t.Fatalf("restart %d: entity %d has %d events, want %d", restart, i, len(got), len(want[i]))
			}
			for k := range got {
				if got[k] != want[i][k] {
					t.Fatalf("restart %d: entity %d event %d is %+v, want %+v", restart, i, k, got[k], want[i][k])
				}
			}
		}
		// An import at the key of a stored older event is a duplicate;
		// one between two stored events is new.
		dup := want[0][3]
		dup.CellID = 0
		r := c.call(core.OpInsert, &core.InsertRequest{Events: []core.GeoEvent{dup}}).(*core.InsertReply)
		if r.Committed || r.Results[0].Code != core.EventExists.Code {
			t.Fatalf("restart %d: importing a stored event: %+v", restart, r)
		}
		if restart == 0 {
			between := want[0][3]
			between.CellID, between.TimestampNS = 0, between.TimestampNS+1
			c.insert(between)
			want[0] = append(want[0][:4], append([]core.GeoEvent{c.history(0)[4]}, want[0][4:]...)...)
		}
		s.stop(t)
	}
	if _, err := os.Stat(filepath.Join(dir, liveHistoryDir)); err != nil {
		t.Fatalf("no live history store: %v", err)
	}
}
