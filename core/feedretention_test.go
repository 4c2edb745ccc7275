package core

import (
	"testing"

	"pgregory.net/rapid"
)

func genRetentionRequest(t *rapid.T, op Operation) any {
	if op == OpSetFeedRetention {
		return &FeedRetention{MaxAgeS: rapid.Uint64().Draw(t, "age"), MaxNotifications: rapid.Uint64().Draw(t, "count")}
	}
	return nil
}

func genRetentionReply(t *rapid.T, _ Operation) any {
	return &FeedRetentionReply{FeedRetention: FeedRetention{MaxAgeS: rapid.Uint64().Draw(t, "age"), MaxNotifications: rapid.Uint64().Draw(t, "count")},
		Start: rapid.Uint64().Draw(t, "start"), Last: rapid.Uint64().Draw(t, "last")}
}

func retentionSampleRequests() map[Operation]any {
	return map[Operation]any{OpSetFeedRetention: &FeedRetention{MaxAgeS: 3600, MaxNotifications: 50_000}, OpGetFeedRetention: nil}
}

func retentionSampleReplies() map[Operation]any {
	r := &FeedRetentionReply{FeedRetention: FeedRetention{MaxAgeS: 86400, MaxNotifications: 10_000_000}, Start: 3<<32 + 1, Last: 9 << 32}
	return map[Operation]any{OpSetFeedRetention: r, OpGetFeedRetention: r}
}

func TestCheckFeedRetention(t *testing.T) {
	for _, ok := range []FeedRetention{{60, 1000}, {365 * 86400, 100_000_000}, {86400, 10_000_000}} {
		if err := CheckFeedRetention(&ok); err != nil {
			t.Errorf("%+v: %v", ok, err)
		}
	}
	for _, bad := range []FeedRetention{{}, {59, 1000}, {365*86400 + 1, 1000}, {60, 999}, {60, 100_000_001}, {60, 0}, {0, 1000}} {
		if e, ok := CheckFeedRetention(&bad).(*Error); !ok || e.Code != InvalidArgument.Code {
			t.Errorf("%+v: %v, want INVALID_ARGUMENT", bad, e)
		}
	}
}

// A feed page's last is optional on the wire: a page without it (as
// replicas before it wrote) decodes with Last 0, and a trailing 0 is not
// an encoding.
func TestFeedPageLast(t *testing.T) {
	p := &FeedPage{Start: 1, Next: 2, Last: 3 << 32}
	b, err := ReadFeed.AppendReply(nil, p)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ReadFeed.DecodeReply(b)
	if err != nil || got.Last != p.Last {
		t.Fatalf("last %d %v", got.Last, err)
	}
	old, _ := ReadFeed.AppendReply(nil, &FeedPage{Start: 1, Next: 2})
	if len(old) != len(b)-8 {
		t.Fatalf("a page without last is %d bytes, with %d", len(old), len(b))
	}
	if got, err := ReadFeed.DecodeReply(old); err != nil || got.Last != 0 {
		t.Fatalf("old page: %+v %v", got, err)
	}
	zero := append(old, make([]byte, 8)...)
	if _, err := ReadFeed.DecodeReply(zero); err == nil {
		t.Fatal("a trailing last of 0 decoded")
	}
}

// FuzzFeedRetention: set_feed_retention's request decodes from any bytes
// without panicking, and what decodes is accepted exactly within the
// limits and encodes back to the same bytes.
func FuzzFeedRetention(f *testing.F) {
	for _, r := range []FeedRetention{{60, 1000}, {59, 1000}, {365 * 86400, 100_000_000}, {365*86400 + 1, 1}} {
		b, _ := SetFeedRetention.AppendRequest(nil, &r)
		f.Add(b)
	}
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := SetFeedRetention.DecodeRequest(b)
		if err != nil {
			return
		}
		in := r.MaxAgeS >= MinFeedRetentionAgeS && r.MaxAgeS <= MaxFeedRetentionAgeS &&
			r.MaxNotifications >= MinFeedRetentionCount && r.MaxNotifications <= MaxFeedRetentionCount
		if (CheckFeedRetention(r) == nil) != in {
			t.Fatalf("%+v: check %v", r, CheckFeedRetention(r))
		}
		again, err := SetFeedRetention.AppendRequest(nil, r)
		if err != nil || string(again) != string(b) {
			t.Fatalf("%+v encodes to %x, decoded from %x: %v", r, again, b, err)
		}
	})
}
