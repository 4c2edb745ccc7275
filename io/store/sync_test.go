package store

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// short turns "file /x/log-0001.seg.tmp" into "file log-0001.seg.tmp" and
// "dir /x" into "dir".
func short(syncs []string) []string {
	out := make([]string, len(syncs))
	for i, s := range syncs {
		kind, path, _ := strings.Cut(s, " ")
		if kind == "dir" {
			out[i] = "dir"
		} else {
			out[i] = kind + " " + filepath.Base(path)
		}
	}
	return out
}

func wantSyncs(t *testing.T, step string, got []string, want ...string) {
	t.Helper()
	if got := short(got); !slices.Equal(got, want) {
		t.Fatalf("%s: fsyncs %q, want %q", step, got, want)
	}
}

// TestSyncProtocol pins down which fsyncs each operation issues and in what
// order: a segment's header is fsynced before its rename; Sync fsyncs the
// directory and replaces the manifest only after a segment was created; a
// roll makes the full segment and the directory durable before creating
// the next one; removals replace the manifest before they remove a segment
// it names.
func TestSyncProtocol(t *testing.T) {
	dir := t.TempDir()
	syncs := recordSyncs(t)
	l, _ := mustOpen(t, dir, 100)
	defer l.Close()
	wantSyncs(t, "open empty", syncs(), "dir", "file "+manifestName+".tmp", "dir")

	seg1, seg2, seg3 := segmentName(1), segmentName(2), segmentName(3)
	if err := l.Append([]Entry{{Index: 1, Term: 1, Data: make([]byte, 90)}}); err != nil {
		t.Fatal(err)
	}
	wantSyncs(t, "first append", syncs(), "file "+seg1+".tmp")
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	// The handle keeps the name it was opened with, the .tmp one.
	wantSyncs(t, "first sync", syncs(), "file "+seg1+".tmp", "dir", "file "+manifestName+".tmp", "dir")
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	wantSyncs(t, "idle sync", syncs())

	// Two rolls in one Append: the second waits for the first segment's
	// directory entry.
	if err := l.Append([]Entry{{Index: 2, Term: 1, Data: make([]byte, 90)}, {Index: 3, Term: 1}}); err != nil {
		t.Fatal(err)
	}
	wantSyncs(t, "two rolls", syncs(),
		"file "+seg2+".tmp",        // header; seg1 was synced already
		"file "+seg2+".tmp", "dir", // seg2 full: data, then its directory entry

		"file "+seg3+".tmp")
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	wantSyncs(t, "sync after rolls", syncs(), "file "+seg3+".tmp", "dir", "file "+manifestName+".tmp", "dir")

	if err := l.Append([]Entry{{Index: 4, Term: 1}}); err != nil {
		t.Fatal(err)
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	wantSyncs(t, "plain append", syncs(), "file "+seg3+".tmp")

	// TruncateAfter into seg2: the manifest stops naming seg3, seg3 goes,
	// the directory is fsynced, then seg2 (reopened under its real name)
	// needs no cut: no file fsync.
	if err := l.TruncateAfter(2); err != nil {
		t.Fatal(err)
	}
	wantSyncs(t, "truncate to a segment end", syncs(), "file "+manifestName+".tmp", "dir", "dir")
	if err := l.CompactBefore(2); err != nil {
		t.Fatal(err)
	}
	wantSyncs(t, "compact", syncs(), "file "+manifestName+".tmp", "dir", "dir")
	if err := l.Reset(10); err != nil {
		t.Fatal(err)
	}
	wantSyncs(t, "reset", syncs(), "file "+manifestName+".tmp", "dir", "dir", "file "+segmentName(10)+".tmp", "dir", "file "+manifestName+".tmp", "dir")
}
