package history

import (
	"errors"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/geoevent/geoevent/core"
)

// checkpointFor writes entities*perEntity events into a store on fs in
// base and checkpoints it into base/cp; it returns the store's digest.
func checkpointFor(t testing.TB, fs vfs.FS, base string, entities, perEntity int) [32]byte {
	t.Helper()
	s, err := Open(fs, fs.PathJoin(base, "live"), Options{CacheBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var ws []core.HistoryWrite
	for i := range perEntity {
		for id := 1; id <= entities; id++ {
			e := ev(uint64(id), uint64(i+1)*1e9)
			e.LatNano += int64(i * 1000)
			ws = append(ws, put(e))
		}
	}
	if err := s.Apply(7, ws); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Checkpoint(fs.PathJoin(base, "cp")); err != nil {
		t.Fatal(err)
	}
	d, err := s.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// send carries st to r in chunks of the sizes given, in turn.
func send(t *testing.T, st *Stream, r *Receiver, sizes ...int) {
	t.Helper()
	for i := 0; r.Next() < st.Size(); i++ {
		b, err := st.ReadChunk(r.Next(), sizes[i%len(sizes)])
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Write(r.Next(), b); err != nil {
			t.Fatal(err)
		}
	}
}

// A checkpoint streamed in chunks of any size, with chunks resent and
// chunks after a lost one refused, arrives whole: opened as a store, it
// holds what the checkpoint held. On pebble's memory filesystem (the
// simulator's) as on disk.
func TestStreamCarriesACheckpoint(t *testing.T) {
	for _, fs := range []vfs.FS{vfs.NewMem(), vfs.Default} {
		base := ""
		if fs == vfs.Default {
			base = t.TempDir()
		}
		path := func(name string) string { return fs.PathJoin(base, name) }
		want := checkpointFor(t, fs, base, 20, 300)
		st, err := OpenStream(fs, path("cp"))
		if err != nil {
			t.Fatal(err)
		}
		r, err := NewReceiver(fs, path("staging"))
		if err != nil {
			t.Fatal(err)
		}
		// The header first, a byte at a time (its length grows as names
		// come), then chunks that straddle files.
		for r.Next() < 40 {
			b, _ := st.ReadChunk(r.Next(), 1)
			if err := r.Write(r.Next(), b); err != nil {
				t.Fatal(err)
			}
		}
		b, _ := st.ReadChunk(r.Next(), 1000)
		if err := r.Write(r.Next(), b); err != nil {
			t.Fatal(err)
		}
		if err := r.Write(r.Next()-10, b[990:]); !errors.Is(err, ErrStreamOffset) {
			t.Fatalf("a resent chunk: %v, want ErrStreamOffset", err)
		}
		if err := r.Write(r.Next()+5, []byte("x")); !errors.Is(err, ErrStreamOffset) {
			t.Fatalf("a chunk after a gap: %v, want ErrStreamOffset", err)
		}
		send(t, st, r, 7, 4096, 1, 65536, 333)
		if !r.Complete() || r.Size() != st.Size() {
			t.Fatalf("complete %v, %d of %d bytes", r.Complete(), r.Next(), st.Size())
		}
		if err := Restore(fs, path("staging"), path("installed")); err != nil {
			t.Fatal(err)
		}
		s, err := Open(fs, path("installed"), Options{})
		if err != nil {
			t.Fatal(err)
		}
		got, err := s.Digest()
		if err != nil || got != want || s.Applied() != 7 {
			t.Fatalf("installed store: digest %x applied %d (%v), want %x and 7", got, s.Applied(), err, want)
		}
		s.Close()
	}
}

// A byte damaged in transit, in the header or in a file, is refused: the
// receiver never completes.
func TestStreamRefusesDamage(t *testing.T) {
	fs := vfs.NewMem()
	checkpointFor(t, fs, "", 5, 50)
	st, err := OpenStream(fs, "cp")
	if err != nil {
		t.Fatal(err)
	}
	all, err := st.ReadChunk(0, int(st.Size()))
	if err != nil || int64(len(all)) != st.Size() {
		t.Fatalf("%d bytes of %d: %v", len(all), st.Size(), err)
	}
	for _, at := range []int{3, 20, len(st.header) - 2, len(st.header) + 10, len(all) - 1} {
		b := append([]byte(nil), all...)
		b[at] ^= 0x10
		r, err := NewReceiver(fs, "staging")
		if err != nil {
			t.Fatal(err)
		}
		err = r.Write(0, b)
		if err == nil || r.Complete() {
			t.Fatalf("a byte damaged at %d of %d: %v, complete %v", at, len(b), err, r.Complete())
		}
		r.Close()
	}
}

// FuzzStreamReceiver feeds arbitrary bytes, in chunks of sizes the input
// picks, to a receiver: it never panics, never writes outside its
// directory, and completes only on a stream whose files check out.
func FuzzStreamReceiver(f *testing.F) {
	fs := vfs.NewMem()
	checkpointFor(f, fs, "", 3, 20)
	st, err := OpenStream(fs, "cp")
	if err != nil {
		f.Fatal(err)
	}
	good, err := st.ReadChunk(0, int(st.Size()))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good, uint16(4096))
	f.Add(good[:len(st.header)], uint16(1))
	f.Add([]byte(streamMagic+"\x01\x00\x00\x00\x02\x00..\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"), uint16(3))
	f.Add([]byte(streamMagic+"\xff\xff\xff\xff"), uint16(16))
	f.Fuzz(func(t *testing.T, data []byte, chunk uint16) {
		mem := vfs.NewMem()
		r, err := NewReceiver(mem, "staging")
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		n := max(int(chunk), 1)
		for off := 0; off < len(data); off += n {
			if err := r.Write(int64(off), data[off:min(off+n, len(data))]); err != nil {
				return
			}
		}
		names, err := mem.List("")
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range names {
			if name != "staging" {
				t.Fatalf("the receiver wrote %q outside its directory", name)
			}
		}
		if r.Complete() {
			for _, f := range r.files {
				if _, crc, err := checksumFile(mem, mem.PathJoin("staging", f.name)); err != nil || crc != f.crc || strings.ContainsAny(f.name, "/\\") {
					t.Fatalf("complete with %s damaged or misnamed: %v", f.name, err)
				}
			}
		}
	})
}
