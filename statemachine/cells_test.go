package statemachine

import (
	"testing"

	"pgregory.net/rapid"

	"github.com/geoevent/geoevent/core"
)

// AssignRecordCells on encoded records gives the records of AssignCells'
// events, for positions valid or not.
func TestAssignRecordCellsMatchesAssignCells(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(0, 20).Draw(t, "n")
		evs := make([]core.GeoEvent, n)
		var recs []byte
		for i := range evs {
			evs[i] = core.GeoEvent{
				EntityID: core.Uint128{Lo: uint64(i + 1)},
				LatNano:  rapid.Int64Range(-95_000_000_000, 95_000_000_000).Draw(t, "lat"),
				LonNano:  rapid.Int64Range(-185_000_000_000, 185_000_000_000).Draw(t, "lon"),
				CellID:   rapid.Uint64().Draw(t, "cell"),
			}
			recs = evs[i].AppendRecord(recs)
		}
		AssignCells(evs)
		AssignRecordCells(recs)
		var want []byte
		for i := range evs {
			want = evs[i].AppendRecord(want)
		}
		if string(recs) != string(want) {
			t.Fatalf("records differ from the encoded events")
		}
	})
}
