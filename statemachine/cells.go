package statemachine

import (
	"encoding/binary"

	"github.com/geoevent/geoevent/core"
	"github.com/geoevent/geoevent/statemachine/internal/geom"
)

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
