package core

import (
	"strings"
	"testing"

	"pgregory.net/rapid"
)

func genHook(t *rapid.T) Hook {
	return Hook{
		Name:      genBytesString(t, 40, "name"),
		URL:       rapid.StringN(0, 80, MaxHookURLLen).Draw(t, "url"),
		Fences:    rapid.SliceOfN(rapid.StringN(0, 10, 64), 0, 4).Draw(t, "fences"),
		Types:     NotifyMask(rapid.Uint8().Draw(t, "types")),
		Delivered: rapid.Uint64().Draw(t, "delivered"),
		Version:   rapid.Uint64().Draw(t, "version"),
	}
}

func genHookRequest(t *rapid.T, op Operation) any {
	switch op {
	case OpPutHook:
		h := genHook(t)
		return &h
	case OpGetHook, OpDeleteHook:
		return &HookName{Name: genBytesString(t, MaxCodecString, "name")}
	case OpListHooks:
		return &HookListRequest{After: genBytesString(t, 70, "after"), Limit: rapid.Uint32().Draw(t, "limit")}
	case OpHookDelivered:
		return &HookDelivered{Name: genBytesString(t, 70, "name"), Version: rapid.Uint64().Draw(t, "version"), Seq: rapid.Uint64().Draw(t, "seq")}
	}
	panic("no generator for " + op.String())
}

func genHookReply(t *rapid.T, op Operation) any {
	switch op {
	case OpPutHook:
		return &PutHookReply{Created: rapid.Bool().Draw(t, "created")}
	case OpGetHook:
		h := genHook(t)
		return &h
	case OpDeleteHook:
		return &DeleteHookReply{Deleted: rapid.Bool().Draw(t, "deleted")}
	case OpListHooks:
		return &HookList{Hooks: rapid.SliceOfN(rapid.Custom(genHook), 0, 3).Draw(t, "hooks"),
			HasMore: rapid.Bool().Draw(t, "more"), Total: rapid.Uint32().Draw(t, "total"), FeedLast: rapid.Uint64().Draw(t, "last")}
	case OpHookDelivered:
		return &HookDeliveredReply{Delivered: rapid.Uint64().Draw(t, "delivered"), Advanced: rapid.Bool().Draw(t, "advanced")}
	}
	panic("no generator for " + op.String())
}

func hookSampleRequests() map[Operation]any {
	return map[Operation]any{
		OpPutHook: &Hook{Name: "dispatch", URL: "https://example.com/geo?k=1", Fences: []string{"depot"}, Types: DefaultNotify},
		OpGetHook: &HookName{Name: "dispatch"}, OpDeleteHook: &HookName{Name: "dispatch"},
		OpListHooks:     &HookListRequest{After: "a", Limit: 10},
		OpHookDelivered: &HookDelivered{Name: "dispatch", Version: 3, Seq: 5<<32 + 2},
	}
}

func hookSampleReplies() map[Operation]any {
	h := Hook{Name: "dispatch", URL: "http://10.0.0.7:8080/hook", Types: AllNotify, Delivered: 4 << 32, Version: 2}
	return map[Operation]any{
		OpPutHook: &PutHookReply{Created: true}, OpGetHook: &h, OpDeleteHook: &DeleteHookReply{Deleted: true},
		OpListHooks:     &HookList{Hooks: []Hook{h, {Name: "b", URL: "https://b.example"}}, Total: 2, FeedLast: 9<<32 + 1},
		OpHookDelivered: &HookDeliveredReply{Delivered: 5 << 32, Advanced: true},
	}
}

func TestHookURLs(t *testing.T) {
	for _, ok := range []string{"http://a", "https://example.com/x?y=1#z", "HTTP://127.0.0.1:8080/", "https://[::1]:9/h",
		"http://" + strings.Repeat("a", MaxHookURLLen-7)} {
		if !ValidHookURL(ok) {
			t.Errorf("%.40q refused", ok)
		}
	}
	for _, bad := range []string{"", "http://", "https:///x", "ftp://a", "http:/a", "http://a b", "http://a\x00",
		"http://é", "mailto:a@b", "//a", "http://:80", "http://" + strings.Repeat("a", MaxHookURLLen-6)} {
		if ValidHookURL(bad) {
			t.Errorf("%.40q accepted", bad)
		}
	}
}

func TestCheckHook(t *testing.T) {
	good := Hook{Name: "h", URL: "http://x", Fences: []string{"a", "b"}, Types: DefaultNotify}
	if err := CheckHook(&good); err != nil {
		t.Fatal(err)
	}
	many := make([]string, MaxHookFenceList+1)
	for i := range many {
		many[i] = "f"
	}
	for _, bad := range []Hook{
		{Name: "", URL: "http://x"}, {Name: "a/b", URL: "http://x"}, {Name: "h", URL: "file:///x"},
		{Name: "h", URL: "http://x", Fences: []string{"a,b"}}, {Name: "h", URL: "http://x", Fences: many},
		{Name: "h", URL: "http://x", Types: 1 << 5}, {Name: "h", URL: "http://x", Delivered: 1}, {Name: "h", URL: "http://x", Version: 1},
	} {
		err := CheckHook(&bad)
		if e, ok := err.(*Error); !ok || e.Code != InvalidHook.Code {
			t.Errorf("%+v: %v", bad, err)
		}
	}
}

// FuzzHookURL: the URL check never panics, and what it accepts is within
// the limits and has a scheme and a host.
func FuzzHookURL(f *testing.F) {
	for _, s := range []string{"http://a", "https://example.com/x", "ftp://a", "http://", "HTTPS://A:1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !ValidHookURL(s) {
			return
		}
		l := strings.ToLower(s)
		if len(s) > MaxHookURLLen || !strings.HasPrefix(l, "http://") && !strings.HasPrefix(l, "https://") || strings.ContainsAny(s, " \n\t") {
			t.Fatalf("%q accepted", s)
		}
	})
}
