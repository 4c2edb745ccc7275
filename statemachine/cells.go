package statemachine

import (
	"encoding/binary"

	"github.com/geoevent/geoevent/core"
	"github.com/geoevent/geoevent/statemachine/internal/geom"
)

// AssignCells sets each event's CellID to the S2 leaf cell of its position.
// The leader does this once to a batch, on its encoded records
// (AssignRecordCells), before the operation enters the log, so that
// floating point never decides state on a follower. Events whose
// coordinates are out of range are left alone; validation rejects them.
func AssignCells(events []core.GeoEvent) {
	for i := range events {
		e := &events[i]
		if core.ValidCoordinate(e.LatNano, e.LonNano) {
			e.CellID = geom.LeafCell(e.LatNano, e.LonNano)
		}
	}
}

// AssignRecordCells does what AssignCells does to events encoded as
// core.RecordSize-byte records (core.GeoEvent.PutRecord's layout): each
// record with a valid position gets the S2 leaf cell of that position in
// its cell_id bytes (56-63). The leader uses it to fill a batch's cells in
// the bytes it copies into its log, without decoding the batch.
func AssignRecordCells(records []byte) {
	le := binary.LittleEndian
	for off := 0; off+core.RecordSize <= len(records); off += core.RecordSize {
		r := records[off : off+core.RecordSize]
		lat, lon := int64(le.Uint64(r[64:72])), int64(le.Uint64(r[72:80]))
		if core.ValidCoordinate(lat, lon) {
			le.PutUint64(r[56:64], geom.LeafCell(lat, lon))
		}
	}
}
