package store

import (
	"fmt"
	"os"
	"testing"
)

// benchDir is where benchmarks write: $GEOEVENT_BENCH_DIR when set (point it
// at the disk that matters; a tmpfs makes fsync free), else a temp dir.
func benchDir(b *testing.B) string {
	if d := os.Getenv("GEOEVENT_BENCH_DIR"); d != "" {
		dir, err := os.MkdirTemp(d, "bench")
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { os.RemoveAll(dir) })
		return dir
	}
	return b.TempDir()
}

var benchSizes = []struct {
	name string
	size int
}{{"128B", 128}, {"1.28MB", 10_000 * 128}}

// BenchmarkAppendSync appends one entry and syncs it, as a leader does for
// each batch: 128 B (one event) and 1.28 MB (a full batch of 10,000 events).
// Compare with BenchmarkRawWriteSync, the same bytes written and fdatasynced
// with no log around them.
func BenchmarkAppendSync(b *testing.B) {
	for _, bs := range benchSizes {
		b.Run(bs.name, func(b *testing.B) {
			l, _, err := OpenLog(benchDir(b), LogOptions{})
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			data := dataFor(1, bs.size)
			b.SetBytes(int64(bs.size))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := l.Append([]Entry{{Index: uint64(i) + 1, Term: 1, Data: data}}); err != nil {
					b.Fatal(err)
				}
				if err := l.Sync(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkAppendOnly measures Append without Sync: the cost the log adds
// (checksum, buffering, write to the page cache).
func BenchmarkAppendOnly(b *testing.B) {
	for _, bs := range benchSizes {
		b.Run(bs.name, func(b *testing.B) {
			fastSync(b)
			l, _, err := OpenLog(benchDir(b), LogOptions{})
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			data := dataFor(1, bs.size)
			b.SetBytes(int64(bs.size))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := l.Append([]Entry{{Index: uint64(i) + 1, Term: 1, Data: data}}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkRawWriteSync is the floor: write the same number of bytes
// (record header included) to a file and fdatasync it.
func BenchmarkRawWriteSync(b *testing.B) {
	for _, bs := range benchSizes {
		b.Run(bs.name, func(b *testing.B) {
			f, err := os.Create(fmt.Sprintf("%s/raw", benchDir(b)))
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			buf := make([]byte, bs.size+RecordHeaderSize)
			b.SetBytes(int64(bs.size))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := f.Write(buf); err != nil {
					b.Fatal(err)
				}
				if err := fdatasync(f); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
