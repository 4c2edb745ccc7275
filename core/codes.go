package core

import "fmt"

// Code is a result code of the spec's error table: 0 is success; 1-99
// protocol (and the spec's per-event codes), 100-199 validation, 200-299
// state, 300-399 resource limits, 400-499 security boundary, 500-599 internal.
type Code uint16

// CodeInfo is one row of the result-code table.
type CodeInfo struct {
	Code       Code
	Name       string
	HTTPStatus int
	Retryable  bool
}

// The result-code table. Rows marked "spec" come from SPEC.md's error table;
// the others are GeoEvent's additions, each in its category's range. The spec
// gives code 101 three names and code 300 two; each name is its own row.
var (
	OK = CodeInfo{0, "OK", 200, false}

	// Protocol, 1-99. Codes 3, 7, 9 and 10 are the spec's; the spec uses this
	// range for per-event results, and so do our per-event additions 8, 11-14.
	MalformedRequest     = CodeInfo{1, "MALFORMED_REQUEST", 400, false}
	ChecksumMismatch     = CodeInfo{2, "CHECKSUM_MISMATCH", 400, false}
	EntityNotFound       = CodeInfo{3, "ENTITY_NOT_FOUND", 400, false} // spec; 400: SPEC.md keeps 404 for the entity lookup, whose answer the HTTP gateway builds itself
	UnknownOperation     = CodeInfo{4, "UNKNOWN_OPERATION", 400, false}
	EntityIDZero         = CodeInfo{7, "ENTITY_ID_MUST_NOT_BE_ZERO", 400, false} // spec, per event
	EventExists          = CodeInfo{8, "EVENT_EXISTS", 400, false}               // per event
	LatOutOfRange        = CodeInfo{9, "LAT_OUT_OF_RANGE", 400, false}           // spec, per event
	LonOutOfRange        = CodeInfo{10, "LON_OUT_OF_RANGE", 400, false}          // spec, per event
	AltitudeOutOfRange   = CodeInfo{11, "ALTITUDE_OUT_OF_RANGE", 400, false}     // per event
	VelocityOutOfRange   = CodeInfo{12, "VELOCITY_OUT_OF_RANGE", 400, false}     // per event
	HeadingOutOfRange    = CodeInfo{13, "HEADING_OUT_OF_RANGE", 400, false}      // per event
	TimestampInFuture    = CodeInfo{14, "TIMESTAMP_IN_FUTURE", 400, false}       // per event
	ReservedBytesNotZero = CodeInfo{15, "RESERVED_NOT_ZERO", 400, false}
	RequestMismatch      = CodeInfo{16, "REQUEST_MISMATCH", 400, false} // a session's request number reused for another request

	// Validation, 100-199.
	InvalidCoordinates = CodeInfo{100, "INVALID_COORDINATES", 400, false} // spec
	InvalidEntityID    = CodeInfo{101, "INVALID_ENTITY_ID", 400, false}   // spec
	InvalidRadius      = CodeInfo{101, "INVALID_RADIUS", 400, false}      // spec
	EmptyRequest       = CodeInfo{101, "EMPTY_REQUEST", 400, false}       // spec
	PolygonTooComplex  = CodeInfo{102, "POLYGON_TOO_COMPLEX", 400, false} // spec
	InvalidPolygon     = CodeInfo{103, "INVALID_POLYGON", 400, false}     // spec
	InvalidCursor      = CodeInfo{104, "INVALID_CURSOR", 400, false}
	InvalidEvent       = CodeInfo{105, "INVALID_EVENT", 400, false} // batch-level form of codes 8, 11-15
	NoTTLSet           = CodeInfo{106, "NO_TTL_SET", 400, false}    // spec
	InvalidTimeRange   = CodeInfo{107, "INVALID_TIME_RANGE", 400, false}
	InvalidArgument    = CodeInfo{108, "INVALID_ARGUMENT", 400, false}
	InvalidFence       = CodeInfo{120, "INVALID_FENCE", 400, false} // a fence's name, shape kind or report types
	InvalidHook        = CodeInfo{121, "INVALID_HOOK", 400, false}  // a hook's name, URL or feed filter

	// State, 200-299. Codes 201-205 and 212 are ours: the session protocol
	// of the binary client and backpressure.
	SessionExpired       = CodeInfo{201, "SESSION_EXPIRED", 400, false}  // unknown or evicted session: register again
	RequestInFlight      = CodeInfo{202, "REQUEST_IN_FLIGHT", 503, true} // an earlier request of the session is not yet applied here: retry
	StaleRequest         = CodeInfo{203, "STALE_REQUEST", 400, false}    // request number below the session's last
	WrongCluster         = CodeInfo{204, "WRONG_CLUSTER", 400, false}
	SessionLimit         = CodeInfo{205, "SESSION_LIMIT", 400, false}          // the connection holds as many live sessions as it may register
	ClusterBusy          = CodeInfo{212, "CLUSTER_BUSY", 503, true}            // queues full: retry with backoff
	ClusterUnavailable   = CodeInfo{211, "CLUSTER_UNAVAILABLE", 503, true}     // spec
	FollowerReadOnly     = CodeInfo{213, "FOLLOWER_READ_ONLY", 400, false}     // spec
	StaleFollower        = CodeInfo{214, "STALE_FOLLOWER", 503, true}          // spec
	PrimaryUnreachable   = CodeInfo{215, "PRIMARY_UNREACHABLE", 503, true}     // spec
	ReplicationTimeout   = CodeInfo{216, "REPLICATION_TIMEOUT", 504, true}     // spec
	ConflictDetected     = CodeInfo{217, "CONFLICT_DETECTED", 400, false}      // spec
	GeoShardMismatch     = CodeInfo{218, "GEO_SHARD_MISMATCH", 400, false}     // spec
	NotShardLeader       = CodeInfo{220, "NOT_SHARD_LEADER", 503, true}        // spec
	ShardUnavailable     = CodeInfo{221, "SHARD_UNAVAILABLE", 503, true}       // spec
	ReshardingInProgress = CodeInfo{222, "RESHARDING_IN_PROGRESS", 503, true}  // spec
	InvalidShardCount    = CodeInfo{223, "INVALID_SHARD_COUNT", 400, false}    // spec
	ShardMigrationFailed = CodeInfo{224, "SHARD_MIGRATION_FAILED", 500, false} // spec
	FenceNotFound        = CodeInfo{240, "FENCE_NOT_FOUND", 404, false}
	FeedTrimmed          = CodeInfo{241, "FEED_TRIMMED", 400, false} // the feed no longer holds notifications after the requested sequence
	HookNotFound         = CodeInfo{242, "HOOK_NOT_FOUND", 404, false}
	StreamFellBehind     = CodeInfo{245, "STREAM_FELL_BEHIND", 503, true} // a position stream's reader fell too far behind: the stream ended; open another

	// Resource limits, 300-399.
	BatchTooLarge       = CodeInfo{300, "BATCH_TOO_LARGE", 400, false}        // spec
	QueryResultTooLarge = CodeInfo{300, "QUERY_RESULT_TOO_LARGE", 400, false} // spec
	TooManyFences       = CodeInfo{340, "TOO_MANY_FENCES", 400, false}
	TooManyHooks        = CodeInfo{341, "TOO_MANY_HOOKS", 400, false}

	// Security boundary, 400-499: reserved by the spec for external layers.
	EncryptionKeyUnavailable     = CodeInfo{410, "ENCRYPTION_KEY_UNAVAILABLE", 503, true}      // spec
	DecryptionFailed             = CodeInfo{411, "DECRYPTION_FAILED", 500, false}              // spec
	EncryptionNotEnabled         = CodeInfo{412, "ENCRYPTION_NOT_ENABLED", 400, false}         // spec
	KeyRotationInProgress        = CodeInfo{413, "KEY_ROTATION_IN_PROGRESS", 503, true}        // spec
	UnsupportedEncryptionVersion = CodeInfo{414, "UNSUPPORTED_ENCRYPTION_VERSION", 400, false} // spec

	// Internal, 500-599.
	InternalError = CodeInfo{500, "INTERNAL_ERROR", 500, false}
	Corruption    = CodeInfo{501, "CORRUPTION", 500, false}
)

// Codes is every row of the table, in code order. For a code with several
// names, the first row is its primary name.
var Codes = []CodeInfo{
	OK,
	MalformedRequest, ChecksumMismatch, EntityNotFound, UnknownOperation,
	EntityIDZero, EventExists, LatOutOfRange, LonOutOfRange,
	AltitudeOutOfRange, VelocityOutOfRange, HeadingOutOfRange, TimestampInFuture, ReservedBytesNotZero,
	RequestMismatch,
	InvalidCoordinates, InvalidEntityID, InvalidRadius, EmptyRequest, PolygonTooComplex,
	InvalidPolygon, InvalidCursor, InvalidEvent, NoTTLSet, InvalidTimeRange, InvalidArgument, InvalidFence,
	InvalidHook,
	SessionExpired, RequestInFlight, StaleRequest, WrongCluster, SessionLimit,
	ClusterUnavailable, ClusterBusy, FollowerReadOnly, StaleFollower, PrimaryUnreachable, ReplicationTimeout,
	ConflictDetected, GeoShardMismatch, NotShardLeader, ShardUnavailable, ReshardingInProgress,
	InvalidShardCount, ShardMigrationFailed, FenceNotFound, FeedTrimmed, HookNotFound, StreamFellBehind,
	BatchTooLarge, QueryResultTooLarge, TooManyFences, TooManyHooks,
	EncryptionKeyUnavailable, DecryptionFailed, EncryptionNotEnabled, KeyRotationInProgress,
	UnsupportedEncryptionVersion,
	InternalError, Corruption,
}

// Info returns the table row of code c (its primary name), and false for a
// code the table does not know.
func (c Code) Info() (CodeInfo, bool) {
	for _, info := range Codes {
		if info.Code == c {
			return info, true
		}
	}
	return CodeInfo{}, false
}

// Category names the range c lies in: "success", "protocol", "validation",
// "state", "limits", "security" or "internal".
func (c Code) Category() string {
	switch {
	case c == 0:
		return "success"
	case c < 100:
		return "protocol"
	case c < 200:
		return "validation"
	case c < 300:
		return "state"
	case c < 400:
		return "limits"
	case c < 500:
		return "security"
	}
	return "internal"
}

// BatchCode maps a per-event result code to the batch-level error that a
// Form A response reports for it: lat/lon -> 100, zero id -> 101, every other
// per-event code -> 105 INVALID_EVENT.
func BatchCode(c Code) CodeInfo {
	switch c {
	case LatOutOfRange.Code, LonOutOfRange.Code:
		return InvalidCoordinates
	case EntityIDZero.Code:
		return InvalidEntityID
	}
	return InvalidEvent
}

// Error is an operation's failure: a row of the code table plus a message
// for people. It is a value; compare codes, not messages.
type Error struct {
	CodeInfo
	Message string
}

// Errorf builds an *Error with a formatted message.
func Errorf(info CodeInfo, format string, args ...any) *Error {
	return &Error{CodeInfo: info, Message: fmt.Sprintf(format, args...)}
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s (%d): %s", e.Name, e.Code, e.Message)
}
