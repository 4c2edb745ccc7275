package core

// Feed retention is replicated configuration: set_feed_retention goes
// through the log, so every replica trims its feed at the same entries
// and the feeds stay identical. A state that never had it set keeps the
// defaults (DefaultFeedRetentionNS, DefaultFeedRetentionCount).

// The feed retention operations, the codes after the hook operations'.
const (
	OpSetFeedRetention Operation = 34 // PUT /feed/retention
	OpGetFeedRetention Operation = 35 // GET /feed/retention
)

// Limits of feed retention (SetFeedRetention refuses values outside them
// with 108 INVALID_ARGUMENT).
const (
	MinFeedRetentionAgeS  = 60              // one minute
	MaxFeedRetentionAgeS  = 365 * 24 * 3600 // 365 days
	MinFeedRetentionCount = 1_000
	MaxFeedRetentionCount = 100_000_000
)

// FeedRetention bounds the feed: notifications whose operation is more
// than MaxAgeS seconds older than the newest applied entry's, and those
// beyond the newest MaxNotifications, are dropped. It is the request of
// set_feed_retention (both fields within the limits above) and the reply
// of both retention operations.
type FeedRetention struct {
	MaxAgeS          uint64
	MaxNotifications uint64
}

// FeedRetentionReply is the retention in force and the feed's extent:
// Start is the sequence of the oldest notification retained and Last the
// newest made (0: none).
type FeedRetentionReply struct {
	FeedRetention
	Start, Last uint64
}

// CheckFeedRetention validates a set_feed_retention request.
func CheckFeedRetention(r *FeedRetention) error {
	switch {
	case r.MaxAgeS < MinFeedRetentionAgeS || r.MaxAgeS > MaxFeedRetentionAgeS:
		return Errorf(InvalidArgument, "max_age_s %d is outside %d to %d (1 minute to 365 days)",
			r.MaxAgeS, MinFeedRetentionAgeS, MaxFeedRetentionAgeS)
	case r.MaxNotifications < MinFeedRetentionCount || r.MaxNotifications > MaxFeedRetentionCount:
		return Errorf(InvalidArgument, "max_notifications %d is outside %d to %d",
			r.MaxNotifications, MinFeedRetentionCount, MaxFeedRetentionCount)
	}
	return nil
}

// The entries of the retention operations (in the table in optable.go).
var (
	SetFeedRetention = &Op[FeedRetention, FeedRetentionReply]{Code: OpSetFeedRetention, Name: "set_feed_retention", Writes: true,
		encReq: encFeedRetention, decReq: decFeedRetention, encRep: encFeedRetentionRep, decRep: decFeedRetentionRep}
	GetFeedRetention = &Op[None, FeedRetentionReply]{Code: OpGetFeedRetention, Name: "get_feed_retention",
		encReq: encNone, decReq: decNone, encRep: encFeedRetentionRep, decRep: decFeedRetentionRep}
)

func encFeedRetention(e encoder, r *FeedRetention) encoder {
	e.u64(r.MaxAgeS)
	e.u64(r.MaxNotifications)
	return e
}

func decFeedRetention(d decoder) (*FeedRetention, decoder) {
	r := &FeedRetention{MaxAgeS: d.u64(), MaxNotifications: d.u64()}
	return r, d
}

func encFeedRetentionRep(e encoder, r *FeedRetentionReply) encoder {
	e = encFeedRetention(e, &r.FeedRetention)
	e.u64(r.Start)
	e.u64(r.Last)
	return e
}

func decFeedRetentionRep(d decoder) (*FeedRetentionReply, decoder) {
	r := &FeedRetentionReply{}
	r.MaxAgeS, r.MaxNotifications, r.Start, r.Last = d.u64(), d.u64(), d.u64(), d.u64()
	return r, d
}
