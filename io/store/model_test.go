package store

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"syscall"
	"testing"

	"pgregory.net/rapid"
)

// logModel is what the log must hold: entries [base, base+len(ents)), of
// which those with Index <= durable survive a crash.
type logModel struct {
	base    uint64
	ents    []Entry
	durable uint64
}

func (m *logModel) last() uint64 { return m.base + uint64(len(m.ents)) - 1 }

func (m *logModel) lastTerm() uint64 {
	if len(m.ents) == 0 {
		return 1
	}
	return m.ents[len(m.ents)-1].Term
}

// crash simulates the process dying with power lost: what the write buffer
// held is lost; the active segment keeps an arbitrary prefix of its unsynced
// bytes, possibly followed by garbage (a torn write), and may lose the
// last write of its durable end (the slot torn); a segment whose
// directory entry was never fsynced may vanish. Everything fsynced stays.
//
// The newest slot is torn only when no fsync of its file has followed its
// write (synced: the newest slot's sequence number in each segment as of
// the last fsync of its file, or as OpenLog found it): a slot an fsync
// made durable is never written again (the next write goes to the other
// slot), and a crash cannot tear it.
func crash(t *rapid.T, l *Log, synced map[string]uint64) {
	l.bw.Reset(nil)
	if l.w != nil {
		s := l.segs[len(l.segs)-1]
		st, err := l.w.Stat()
		if err != nil {
			t.Fatal(err)
		}
		// The buffer may have been partly written out: pretend some of it was.
		size := st.Size()
		if l.syncedSize > size {
			t.Fatalf("synced size %d beyond the file's %d", l.syncedSize, size)
		}
		keep := rapid.Int64Range(l.syncedSize, size).Draw(t, "keep")
		if end := min(s.size, size); keep < end && rapid.Bool().Draw(t, "keep runway") {
			// The file's size (its runway) was durable, the unsynced records'
			// blocks from keep on were not: they read as zeros.
			if _, err := l.w.WriteAt(make([]byte, end-keep), keep); err != nil {
				t.Fatal(err)
			}
		} else if err := l.w.Truncate(keep); err != nil {
			t.Fatal(err)
		}
		if keep < s.size {
			garbage := rapid.SliceOfN(rapid.Byte(), 0, 40).Draw(t, "garbage")
			if _, err := l.w.WriteAt(garbage, keep); err != nil {
				t.Fatal(err)
			}
		}
		if s.durable.seq > synced[s.path] && rapid.Bool().Draw(t, "tear the newest slot") {
			// Its write had not reached the disk, or only in part: the
			// older slot, which claims less, is the durable end.
			junk := rapid.SliceOfN(rapid.Byte(), slotSize, slotSize).Draw(t, "slot bytes")
			if _, err := l.w.WriteAt(junk, slotOffsets[s.durable.seq%2]); err != nil {
				t.Fatal(err)
			}
		}
		if l.dirDirty && rapid.Bool().Draw(t, "lose new segment") {
			if err := os.Remove(s.path); err != nil {
				t.Fatal(err)
			}
		}
	}
	l.closeFiles()
	l.closed = true
}

// TestLogModel runs random appends, syncs, truncations, compactions, resets,
// reads, clean reopens and crashes against logModel. After a crash the log
// must hold every durable entry and, beyond them, a prefix of what was
// appended (never anything else).
func TestLogModel(t *testing.T) {
	fastSync(t)
	root := t.TempDir()
	rapid.Check(t, func(t *rapid.T) {
		dir, err := os.MkdirTemp(root, "")
		if err != nil {
			t.Fatal(err)
		}
		segBytes := rapid.SampledFrom([]int64{1, 64, 150, 400, 1 << 20}).Draw(t, "segBytes")
		var l *Log
		synced := map[string]uint64{}
		onSync = func(what string) {
			path, ok := strings.CutPrefix(what, "file ")
			if !ok || l == nil {
				return
			}
			path = strings.TrimSuffix(path, ".tmp") // a segment created by this Log keeps the name it was created with
			for _, s := range l.segs {
				if s.path == path {
					synced[path] = s.durable.seq
				}
			}
		}
		defer func() { onSync = nil }()
		open := func() *Log {
			l, _, err := OpenLog(dir, LogOptions{SegmentBytes: segBytes})
			if err != nil {
				t.Fatalf("OpenLog: %v", err)
			}
			clear(synced)
			for _, s := range l.segs {
				synced[s.path] = s.durable.seq
			}
			return l
		}
		l = open()
		defer func() { l.Close() }()
		m := &logModel{base: 1}

		check := func() {
			if l.LastIndex() != m.last() {
				t.Fatalf("LastIndex %d, model %d", l.LastIndex(), m.last())
			}
			if len(m.ents) == 0 {
				if l.FirstIndex() != 0 {
					t.Fatalf("FirstIndex %d of an empty log", l.FirstIndex())
				}
				return
			}
			if l.FirstIndex() != m.base {
				t.Fatalf("FirstIndex %d, model %d", l.FirstIndex(), m.base)
			}
		}

		// batch draws 1 to 4 entries to append after the model's last.
		batch := func(t *rapid.T) []Entry {
			n := rapid.IntRange(1, 4).Draw(t, "n")
			term := m.lastTerm() + rapid.Uint64Range(0, 1).Draw(t, "term step")
			var es []Entry
			for i := 0; i < n; i++ {
				idx := m.last() + 1 + uint64(i)
				es = append(es, Entry{Index: idx, Term: term, Data: rapid.SliceOfN(rapid.Byte(), 0, 60).Draw(t, "data")})
			}
			return es
		}
		// cutBack checks that the log, after what (a crash, a lack of
		// space), holds a prefix of the model's entries, at least its
		// durable ones, all durable now; and cuts the model to it.
		cutBack := func(t *rapid.T, what string) {
			got := l.LastIndex()
			if got < max(m.durable, m.base-1) || got > m.last() {
				t.Fatalf("after %s LastIndex is %d; durable %d, base %d, appended up to %d", what, got, m.durable, m.base, m.last())
			}
			m.ents = m.ents[:got+1-m.base]
			m.durable = got
			check()
			if len(m.ents) > 0 {
				es, err := l.Entries(m.base, got+1)
				if err != nil {
					t.Fatalf("Entries after %s: %v", what, err)
				}
				if err := sameEntries(es, m.ents); err != nil {
					t.Fatalf("after %s: %v", what, err)
				}
			}
		}

		t.Repeat(map[string]func(*rapid.T){
			"": func(*rapid.T) { check() },
			"append": func(t *rapid.T) {
				es := batch(t)
				if err := l.Append(es); err != nil {
					t.Fatalf("Append: %v", err)
				}
				for _, e := range es {
					m.ents = append(m.ents, Entry{Index: e.Index, Term: e.Term, Data: bytes.Clone(e.Data)})
				}
			},
			"no space": func(t *rapid.T) {
				// One of the writes of a batch and its sync fails for want of
				// space, after writing part of its bytes.
				failAt := rapid.IntRange(0, 3).Draw(t, "failing write")
				partial := rapid.IntRange(0, 200).Draw(t, "bytes it writes")
				calls := 0
				SetWriteFault(func(n int) (int, error) {
					calls++
					if calls-1 == failAt {
						return partial, syscall.ENOSPC
					}
					return n, nil
				})
				defer SetWriteFault(nil)
				es := batch(t)
				err := l.Append(es)
				// Append may have kept some of es (a roll syncs a segment), or
				// taken back entries appended before it.
				for _, e := range es[:min(len(es), max(0, int(l.LastIndex()+1-m.base)-len(m.ents)))] {
					m.ents = append(m.ents, Entry{Index: e.Index, Term: e.Term, Data: bytes.Clone(e.Data)})
				}
				if err == nil {
					if err = l.Sync(); err == nil {
						m.durable = m.last()
						return
					}
				}
				if !errors.Is(err, ErrNoSpace) {
					t.Fatalf("a write without space: %v, want ErrNoSpace", err)
				}
				// The log is back at its durable end: what the last Sync
				// made durable, and any segment a roll synced since.
				cutBack(t, "running out of space")
			},
			"sync": func(t *rapid.T) {
				if err := l.Sync(); err != nil {
					t.Fatalf("Sync: %v", err)
				}
				m.durable = m.last()
			},
			"truncate": func(t *rapid.T) {
				idx := rapid.Uint64Range(m.base-1, m.last()+1).Draw(t, "index")
				if err := l.TruncateAfter(idx); err != nil {
					t.Fatalf("TruncateAfter(%d): %v", idx, err)
				}
				switch {
				case idx >= m.last():
				case idx < m.base:
					m.base, m.ents, m.durable = idx+1, nil, idx
				default:
					m.ents = m.ents[:idx-m.base+1]
					m.durable = min(m.durable, idx)
				}
			},
			"compact": func(t *rapid.T) {
				idx := rapid.Uint64Range(m.base, m.last()+2).Draw(t, "index")
				if err := l.CompactBefore(idx); err != nil {
					t.Fatalf("CompactBefore(%d): %v", idx, err)
				}
				if len(m.ents) == 0 {
					return
				}
				first := l.FirstIndex()
				if first == 0 { // every entry was below idx
					if idx <= m.last() {
						t.Fatalf("CompactBefore(%d) of [%d, %d] emptied the log", idx, m.base, m.last())
					}
					first = m.last() + 1
				}
				if first < m.base || (idx <= m.last() && first > idx) {
					t.Fatalf("CompactBefore(%d) of [%d, %d]: first is %d", idx, m.base, m.last(), first)
				}
				m.ents = m.ents[first-m.base:]
				m.base = first
			},
			"reset": func(t *rapid.T) {
				lo := uint64(1)
				if m.last() > 2 {
					lo = m.last() - 1
				}
				next := rapid.Uint64Range(lo, m.last()+5).Draw(t, "next")
				if err := l.Reset(next); err != nil {
					t.Fatalf("Reset(%d): %v", next, err)
				}
				m.base, m.ents, m.durable = next, nil, next-1
			},
			"read": func(t *rapid.T) {
				from := rapid.Uint64Range(m.base, m.last()+1).Draw(t, "from")
				to := rapid.Uint64Range(from, m.last()+1).Draw(t, "to")
				got, err := l.Entries(from, to)
				if err != nil {
					t.Fatalf("Entries(%d, %d): %v", from, to, err)
				}
				if err := sameEntries(got, m.ents[from-m.base:to-m.base]); err != nil {
					t.Fatalf("Entries(%d, %d): %v", from, to, err)
				}
				if len(m.ents) > 0 {
					i := rapid.IntRange(0, len(m.ents)-1).Draw(t, "term of")
					if term, err := l.Term(m.ents[i].Index); err != nil || term != m.ents[i].Term {
						t.Fatalf("Term(%d) = %d, %v; want %d", m.ents[i].Index, term, err, m.ents[i].Term)
					}
				}
			},
			"reopen": func(t *rapid.T) {
				if err := l.Close(); err != nil {
					t.Fatalf("Close: %v", err)
				}
				l = open()
				m.durable = m.last()
				check()
			},
			"crash": func(t *rapid.T) {
				crash(t, l, synced)
				l = open()
				cutBack(t, "a crash") // OpenLog fsyncs what it found
			},
		})
	})
}
