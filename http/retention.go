package http

import (
	"strconv"

	"github.com/geoevent/geoevent/core"
)

// Feed retention: PUT and GET /feed/retention.
//
//	{"max_age_s": 86400, "max_notifications": 10000000}
//
// Both fields are required: max_age_s 60 to 31,536,000 (a minute to 365
// days), max_notifications 1,000 to 100,000,000; outside them is 108
// INVALID_ARGUMENT. Retention is replicated configuration: a put goes
// through the log, and every replica trims its feed at the same entries,
// at once for the put itself. Both answer the retention in force with the
// feed's extent: "start", the oldest sequence it retains, and "last", the
// newest it has made (decimal strings; "0": none).

const retentionFieldList = "max_age_s, max_notifications"

// PUT /feed/retention.
func (g *Gateway) putFeedRetention(c *call) *failure {
	d, f := c.bodyNoParams(false)
	if f != nil {
		return f
	}
	req, f := parseFeedRetention(d)
	if f != nil {
		return f
	}
	r, f := submit(c, core.SetFeedRetention, req)
	if f != nil {
		return f
	}
	return c.ok(func(w *jw) { w.feedRetention(r) })
}

// GET /feed/retention.
func (g *Gateway) getFeedRetention(c *call) *failure {
	if _, f := c.params(); f != nil {
		return f
	}
	r, f := submit(c, core.GetFeedRetention, nil)
	if f != nil {
		return f
	}
	return c.ok(func(w *jw) { w.feedRetention(r) })
}

// parseFeedRetention reads a retention body, checked as the state machine
// checks it (core.CheckFeedRetention).
func parseFeedRetention(d *doc) (*core.FeedRetention, *failure) {
	if f := d.object(0, ""); f != nil {
		return nil, f
	}
	r := &core.FeedRetention{}
	var f *failure
	var hasAge, hasCount bool
	d.members(0, func(k, v int32) bool {
		switch name := d.keyName(k); name {
		case "max_age_s":
			hasAge = true
			r.MaxAgeS, f = d.uintIn(v, name, core.MinFeedRetentionAgeS, core.MaxFeedRetentionAgeS, core.InvalidArgument)
		case "max_notifications":
			hasCount = true
			r.MaxNotifications, f = d.uintIn(v, name, core.MinFeedRetentionCount, core.MaxFeedRetentionCount, core.InvalidArgument)
		default:
			f = unknownField(d, k, "", retentionFieldList)
		}
		return f == nil
	})
	switch {
	case f != nil:
		return nil, f
	case !hasAge:
		return nil, required("max_age_s")
	case !hasCount:
		return nil, required("max_notifications")
	}
	return r, nil
}

// feedRetention writes the retention in force and the feed's extent.
func (w *jw) feedRetention(r *core.FeedRetentionReply) {
	w.open()
	w.key("max_age_s")
	w.u64(r.MaxAgeS)
	w.key("max_notifications")
	w.u64(r.MaxNotifications)
	w.key("start")
	w.str(strconv.FormatUint(r.Start, 10))
	w.key("last")
	w.str(strconv.FormatUint(r.Last, 10))
	w.close()
}
