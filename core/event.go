package core

import (
	"encoding/binary"
	"slices"
	"strconv"
)

// RecordSize is the size in bytes of one encoded GeoEvent.
const RecordSize = 128

// Field ranges of SPEC.md "GeoEvent".
const (
	MaxLatNano      = 90_000_000_000
	MaxLonNano      = 180_000_000_000
	MinAltitudeMM   = -10_000_000
	MaxAltitudeMM   = 100_000_000
	MaxVelocityMMS  = 1_000_000_000
	MaxHeadingCdeg  = 35_999
	MaxFutureSkewNS = 60_000_000_000 // how far past the operation's time a client timestamp may lie
)

// GeoEvent is one location update of one entity.
//
// Its encoding is a fixed 128-byte record, every integer little-endian:
//
//	offset size field
//	     0   16 entity_id       Uint128, Lo then Hi (see Uint128.PutLE); non-zero
//	    16   16 correlation_id  Uint128
//	    32   16 user_data       Uint128
//	    48    8 timestamp_ns    uint64, Unix epoch ns; 0 in a request = server assigns
//	    56    8 cell_id         uint64, S2 leaf cell of (lat, lon); set by the leader
//	    64    8 lat_nano        int64, nanodegrees, -90e9..90e9
//	    72    8 lon_nano        int64, nanodegrees, -180e9..180e9
//	    80    8 group_id        uint64
//	    88    4 altitude_mm     int32, -10,000,000..100,000,000
//	    92    4 velocity_mms    uint32, 0..1,000,000,000
//	    96    4 ttl_seconds     uint32, 0 = never expires
//	   100    4 accuracy_mm     uint32
//	   104    2 heading_cdeg    uint16, 0..35,999 (0 = North, 9000 = East)
//	   106    2 flags           uint16
//	   108   20 reserved        must be zero
type GeoEvent struct {
	EntityID      Uint128
	CorrelationID Uint128
	UserData      Uint128
	TimestampNS   uint64
	CellID        uint64
	LatNano       int64
	LonNano       int64
	GroupID       uint64
	AltitudeMM    int32
	VelocityMMS   uint32
	TTLSeconds    uint32
	AccuracyMM    uint32
	HeadingCdeg   uint16
	Flags         uint16
}

// ID is the event's composite key as the API shows it: "<entity_id>:<timestamp_ns>".
func (e *GeoEvent) ID() string {
	return e.EntityID.String() + ":" + strconv.FormatUint(e.TimestampNS, 10)
}

// ExpiresAtNS is the time the event expires by its own TTL: its timestamp
// plus ttl_seconds, or 0 when it never expires. It saturates at 2^64-1.
func (e *GeoEvent) ExpiresAtNS() uint64 {
	if e.TTLSeconds == 0 {
		return 0
	}
	return AddSecondsNS(e.TimestampNS, uint64(e.TTLSeconds))
}

// AddSecondsNS returns ts + seconds*1e9, saturating at 2^64-1.
func AddSecondsNS(ts, seconds uint64) uint64 {
	const max = ^uint64(0)
	if seconds > (max-ts)/1_000_000_000 {
		return max
	}
	return ts + seconds*1_000_000_000
}

// AppendRecord appends the 128-byte encoding of e to b.
func (e *GeoEvent) AppendRecord(b []byte) []byte {
	n := len(b)
	b = slices.Grow(b, RecordSize)[:n+RecordSize]
	e.PutRecord(b[n:])
	return b
}

// PutRecord writes the 128-byte encoding of e into r[0:128].
func (e *GeoEvent) PutRecord(r []byte) {
	_ = r[RecordSize-1]
	le := binary.LittleEndian
	e.EntityID.PutLE(r[0:16])
	e.CorrelationID.PutLE(r[16:32])
	e.UserData.PutLE(r[32:48])
	le.PutUint64(r[48:56], e.TimestampNS)
	le.PutUint64(r[56:64], e.CellID)
	le.PutUint64(r[64:72], uint64(e.LatNano))
	le.PutUint64(r[72:80], uint64(e.LonNano))
	le.PutUint64(r[80:88], e.GroupID)
	le.PutUint32(r[88:92], uint32(e.AltitudeMM))
	le.PutUint32(r[92:96], e.VelocityMMS)
	le.PutUint32(r[96:100], e.TTLSeconds)
	le.PutUint32(r[100:104], e.AccuracyMM)
	le.PutUint16(r[104:106], e.HeadingCdeg)
	le.PutUint16(r[106:108], e.Flags)
	clear(r[108:128])
}

// DecodeRecord decodes one 128-byte record. It fails with MALFORMED_REQUEST
// when r is not exactly 128 bytes and RESERVED_NOT_ZERO when the reserved
// bytes are not zero; it does not check field ranges (see Validate).
func DecodeRecord(r []byte) (GeoEvent, error) {
	var e GeoEvent
	err := e.DecodeRecord(r)
	return e, err
}

// DecodeRecord decodes one 128-byte record into e, as the function
// DecodeRecord does; it writes e only when it succeeds. Decoding in place
// spares a large reply (10,000 events) a copy of every event.
func (e *GeoEvent) DecodeRecord(r []byte) error {
	if len(r) != RecordSize {
		return Errorf(MalformedRequest, "event record is %d bytes, want %d", len(r), RecordSize)
	}
	le := binary.LittleEndian
	if le.Uint64(r[108:]) != 0 || le.Uint64(r[116:]) != 0 || le.Uint32(r[124:]) != 0 {
		return Errorf(ReservedBytesNotZero, "event record reserved bytes 108-127 are not zero")
	}
	*e = GeoEvent{
		EntityID:      Uint128FromLE(r[0:16]),
		CorrelationID: Uint128FromLE(r[16:32]),
		UserData:      Uint128FromLE(r[32:48]),
		TimestampNS:   le.Uint64(r[48:56]),
		CellID:        le.Uint64(r[56:64]),
		LatNano:       int64(le.Uint64(r[64:72])),
		LonNano:       int64(le.Uint64(r[72:80])),
		GroupID:       le.Uint64(r[80:88]),
		AltitudeMM:    int32(le.Uint32(r[88:92])),
		VelocityMMS:   le.Uint32(r[92:96]),
		TTLSeconds:    le.Uint32(r[96:100]),
		AccuracyMM:    le.Uint32(r[100:104]),
		HeadingCdeg:   le.Uint16(r[104:106]),
		Flags:         le.Uint16(r[106:108]),
	}
	return nil
}

// Validate checks every field's range and returns the per-event result code
// of the first field out of range (7, 9, 10, 11, 12, 13), or OK. Fields whose
// type already bounds them (ttl, accuracy, flags, ids other than entity_id)
// need no check. Timestamps are checked against the operation's time by the
// state machine.
func (e *GeoEvent) Validate() CodeInfo {
	switch {
	case e.EntityID.IsZero():
		return EntityIDZero
	case e.LatNano < -MaxLatNano || e.LatNano > MaxLatNano:
		return LatOutOfRange
	case e.LonNano < -MaxLonNano || e.LonNano > MaxLonNano:
		return LonOutOfRange
	case e.AltitudeMM < MinAltitudeMM || e.AltitudeMM > MaxAltitudeMM:
		return AltitudeOutOfRange
	case e.VelocityMMS > MaxVelocityMMS:
		return VelocityOutOfRange
	case e.HeadingCdeg > MaxHeadingCdeg:
		return HeadingOutOfRange
	}
	return OK
}

// ValidCoordinate reports whether (latNano, lonNano) is on the globe.
func ValidCoordinate(latNano, lonNano int64) bool {
	return latNano >= -MaxLatNano && latNano <= MaxLatNano && lonNano >= -MaxLonNano && lonNano <= MaxLonNano
}
