package history

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"strings"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// A checkpoint stream carries a checkpoint (Store.Checkpoint) from one
// replica to another as bytes read from disk a chunk at a time (Stream)
// and written to disk a chunk at a time (Receiver), never whole in memory:
// a follower that installs a leader's snapshot gets the history as the
// files of the leader's checkpoint, which it opens as its store (Restore).
// Layout:
//
//	header
//	     8  magic "GEOHSTR1"
//	     4  N, the number of files (little-endian, as every number here)
//	     N  files, each: 2 the name's length, the name, 8 the size, 4 the
//	        CRC-32C (Castagnoli) of the content
//	     4  CRC-32C of the header's bytes before it
//	contents
//	        each file's content, in the header's order
//
// The receiver checks the header's checksum before it creates any file,
// and each file's size and checksum when its last byte has come, so a
// stream damaged in transit or on either disk is never installed. Names
// are plain file names (no separator, not "." or ".."), each at most once.
const streamMagic = "GEOHSTR1"

// Bounds of a header a receiver accepts: what a peer sends cannot make it
// hold more than maxStreamHeader bytes.
const (
	maxStreamFiles  = 1 << 16
	maxStreamName   = 255
	maxStreamHeader = 8 + 4 + maxStreamFiles*(2+maxStreamName+8+4) + 4
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// streamFile is one file of a stream: its name, size, checksum and where
// its content starts in the stream.
type streamFile struct {
	name  string
	size  int64
	crc   uint32
	start int64
}

// Stream is the sending side: a checkpoint directory's files, read from
// disk as chunks are asked for. It holds the header and the files' names,
// not their content.
type Stream struct {
	fs     vfs.FS
	dir    string
	header []byte
	files  []streamFile
	total  int64
}

// OpenStream lists the checkpoint in dir on fs and checksums its files (one
// read of each). The checkpoint must not change while the stream is read.
func OpenStream(fs vfs.FS, dir string) (*Stream, error) {
	names, err := fs.List(dir)
	if err != nil {
		return nil, err
	}
	s := &Stream{fs: fs, dir: dir}
	for _, name := range names {
		if err := checkStreamName(name); err != nil {
			return nil, err
		}
		size, crc, err := checksumFile(fs, fs.PathJoin(dir, name))
		if err != nil {
			return nil, err
		}
		s.files = append(s.files, streamFile{name: name, size: size, crc: crc})
	}
	if len(s.files) > maxStreamFiles {
		return nil, fmt.Errorf("history: a checkpoint of %d files is too many to stream", len(s.files))
	}
	h := binary.LittleEndian.AppendUint32([]byte(streamMagic), uint32(len(s.files)))
	for _, f := range s.files {
		h = binary.LittleEndian.AppendUint16(h, uint16(len(f.name)))
		h = append(h, f.name...)
		h = binary.LittleEndian.AppendUint64(h, uint64(f.size))
		h = binary.LittleEndian.AppendUint32(h, f.crc)
	}
	s.header = binary.LittleEndian.AppendUint32(h, crc32.Checksum(h, castagnoli))
	s.total = int64(len(s.header))
	for i := range s.files {
		s.files[i].start = s.total
		s.total += s.files[i].size
	}
	return s, nil
}

// Size is the stream's length in bytes.
func (s *Stream) Size() int64 { return s.total }

// ReadChunk returns the stream's bytes from off on, at most max (at least
// 1 while off is below Size), read from disk now.
func (s *Stream) ReadChunk(off int64, max int) ([]byte, error) {
	if off < 0 || off > s.total || max <= 0 {
		return nil, fmt.Errorf("history: chunk at %d of a stream of %d bytes", off, s.total)
	}
	out := make([]byte, 0, min(int64(max), s.total-off))
	if off < int64(len(s.header)) {
		out = append(out, s.header[off:min(int64(len(s.header)), off+int64(cap(out)))]...)
	}
	for _, f := range s.files {
		if len(out) == cap(out) {
			break
		}
		at := off + int64(len(out)) // the next byte wanted
		if at < f.start || at >= f.start+f.size {
			continue
		}
		n := min(int64(cap(out)-len(out)), f.start+f.size-at)
		if err := readAt(s.fs, s.fs.PathJoin(s.dir, f.name), at-f.start, out[len(out):len(out)+int(n)]); err != nil {
			return nil, err
		}
		out = out[:len(out)+int(n)]
	}
	return out, nil
}

func readAt(fs vfs.FS, path string, off int64, p []byte) error {
	f, err := fs.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = f.ReadAt(p, off)
	return err
}

func checksumFile(fs vfs.FS, path string) (size int64, crc uint32, err error) {
	f, err := fs.Open(path)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	h := crc32.New(castagnoli)
	size, err = io.Copy(h, f)
	return size, h.Sum32(), err
}

func checkStreamName(name string) error {
	if name == "" || name == "." || name == ".." || len(name) > maxStreamName || strings.ContainsAny(name, `/\`+"\x00") {
		return fmt.Errorf("history: %q is not a plain file name", name)
	}
	return nil
}

// ErrStreamOffset is a chunk that does not start where the receiver's
// bytes end (a duplicate, or one after a lost one): Next says where.
var ErrStreamOffset = errors.New("history: a stream chunk out of order")

// Receiver is the receiving side: it writes a stream's files into a
// staging directory as chunks come, in order, checking the header and each
// file. Complete says when every file is there and verified; the
// directory is then a checkpoint (Restore opens it as a store).
type Receiver struct {
	fs  vfs.FS
	dir string

	got    int64 // the stream's bytes taken
	header []byte
	files  []streamFile // nil until the header is whole
	total  int64
	cur    int      // the file being written
	out    vfs.File // cur's, open
	outN   int64
	sum    hash.Hash32
	err    error // the failure that left it unusable
}

// NewReceiver starts a receiver writing into dir on fs, which it creates
// anew (what dir held is removed).
func NewReceiver(fs vfs.FS, dir string) (*Receiver, error) {
	if err := fs.RemoveAll(dir); err != nil {
		return nil, err
	}
	if err := fs.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	return &Receiver{fs: fs, dir: dir}, nil
}

// Next is the offset of the next byte the receiver takes.
func (r *Receiver) Next() int64 { return r.got }

// Size is the stream's length, once the header has come (0 before).
func (r *Receiver) Size() int64 { return r.total }

// Complete reports whether every file has come and been verified and
// synced, with the directory.
func (r *Receiver) Complete() bool {
	return r.err == nil && r.files != nil && r.cur == len(r.files) && r.got == r.total && r.out == nil
}

// Write takes the chunk p at offset off. A chunk not at Next is refused
// with ErrStreamOffset and changes nothing. Any other error (a damaged
// header or file, a file system's) leaves the receiver unusable: start
// over with a new one.
func (r *Receiver) Write(off int64, p []byte) error {
	if r.err != nil {
		return r.err
	}
	if off != r.got {
		return ErrStreamOffset
	}
	r.err = r.write(p)
	return r.err
}

func (r *Receiver) write(p []byte) error {
	off := r.got
	if r.files != nil && int64(len(p)) > r.total-r.got {
		return fmt.Errorf("history: a chunk of %d bytes at %d runs past the stream's %d", len(p), off, r.total)
	}
	for len(p) > 0 {
		if r.files == nil {
			n, err := r.takeHeader(p)
			if err != nil {
				return err
			}
			p = p[n:]
			continue
		}
		if r.cur == len(r.files) {
			return fmt.Errorf("history: a chunk runs past the stream's %d bytes", r.total)
		}
		f := &r.files[r.cur]
		if r.out == nil {
			out, err := r.fs.Create(r.fs.PathJoin(r.dir, f.name), vfs.WriteCategoryUnspecified)
			if err != nil {
				return err
			}
			r.out, r.outN, r.sum = out, 0, crc32.New(castagnoli)
		}
		n := min(int64(len(p)), f.size-r.outN)
		if _, err := r.out.Write(p[:n]); err != nil {
			return err
		}
		r.sum.Write(p[:n])
		r.outN += n
		r.got += n
		p = p[n:]
		if r.outN == f.size {
			if err := r.closeFile(f); err != nil {
				return err
			}
		}
	}
	return r.finishEmpty()
}

// takeHeader takes header bytes from p, parses the header once whole, and
// returns how many bytes of p it took.
func (r *Receiver) takeHeader(p []byte) (int, error) {
	need, final := 12, false // magic and count first
	if len(r.header) >= 12 {
		var err error
		if need, final, err = headerLen(r.header); err != nil {
			return 0, err
		}
	}
	k := min(len(p), need-len(r.header))
	r.header = append(r.header, p[:k]...)
	r.got += int64(k)
	if !final || len(r.header) < need {
		return k, nil // more to come, or the length grows with what came
	}
	files, err := parseStreamHeader(r.header)
	if err != nil {
		return 0, err
	}
	r.files, r.total = files, int64(len(r.header))
	for i := range r.files {
		r.files[i].start = r.total
		r.total += r.files[i].size
	}
	return k, nil
}

// headerLen is the length of the header whose first bytes (at least 12)
// are h, as far as h tells: final is false while a name's length is still
// to come (the length then counts up to it).
func headerLen(h []byte) (n int, final bool, err error) {
	if string(h[:8]) != streamMagic {
		return 0, false, errors.New("history: not a checkpoint stream (bad magic)")
	}
	files := int(binary.LittleEndian.Uint32(h[8:12]))
	if files > maxStreamFiles {
		return 0, false, fmt.Errorf("history: a checkpoint stream of %d files", files)
	}
	off := 12
	for range files {
		if off+2 > len(h) {
			return off + 2, false, nil
		}
		l := int(binary.LittleEndian.Uint16(h[off:]))
		if l > maxStreamName {
			return 0, false, fmt.Errorf("history: a checkpoint stream names a file of %d bytes", l)
		}
		off += 2 + l + 8 + 4
	}
	return off + 4, true, nil
}

// parseStreamHeader checks and decodes a whole header.
func parseStreamHeader(h []byte) ([]streamFile, error) {
	if len(h) < 16 || len(h) > maxStreamHeader {
		return nil, fmt.Errorf("history: a checkpoint stream header of %d bytes", len(h))
	}
	body := h[:len(h)-4]
	if crc32.Checksum(body, castagnoli) != binary.LittleEndian.Uint32(h[len(h)-4:]) {
		return nil, errors.New("history: the checkpoint stream's header fails its checksum")
	}
	if string(body[:8]) != streamMagic {
		return nil, errors.New("history: not a checkpoint stream (bad magic)")
	}
	n := int(binary.LittleEndian.Uint32(body[8:12]))
	if n > maxStreamFiles {
		return nil, fmt.Errorf("history: a checkpoint stream of %d files", n)
	}
	files := make([]streamFile, 0, n)
	seen := make(map[string]bool, n)
	off := 12
	for range n {
		if off+2 > len(body) {
			return nil, errors.New("history: the checkpoint stream's header is cut short")
		}
		l := int(binary.LittleEndian.Uint16(body[off:]))
		if off+2+l+12 > len(body) {
			return nil, errors.New("history: the checkpoint stream's header is cut short")
		}
		name := string(body[off+2 : off+2+l])
		if err := checkStreamName(name); err != nil || seen[name] {
			return nil, fmt.Errorf("history: the checkpoint stream names %q twice or badly", name)
		}
		seen[name] = true
		size := binary.LittleEndian.Uint64(body[off+2+l:])
		if size > 1<<50 {
			return nil, fmt.Errorf("history: the checkpoint stream holds a file of %d bytes", size)
		}
		files = append(files, streamFile{name: name, size: int64(size), crc: binary.LittleEndian.Uint32(body[off+2+l+8:])})
		off += 2 + l + 12
	}
	if off != len(body) {
		return nil, errors.New("history: the checkpoint stream's header has bytes after its files")
	}
	return files, nil
}

// closeFile checks the file just written against the header, syncs and
// closes it, and moves to the next.
func (r *Receiver) closeFile(f *streamFile) error {
	err := r.out.Sync()
	err = errors.Join(err, r.out.Close())
	r.out = nil
	if err != nil {
		return err
	}
	if got := r.sum.Sum32(); got != f.crc {
		return fmt.Errorf("history: %s of the checkpoint stream fails its checksum (%08x, want %08x)", f.name, got, f.crc)
	}
	r.cur++
	return nil
}

// finishEmpty creates the files of no bytes that are next (a chunk never
// carries them) and, once every file is there, syncs the directory.
func (r *Receiver) finishEmpty() error {
	if r.files == nil {
		return nil
	}
	for r.cur < len(r.files) && r.files[r.cur].size == 0 && r.out == nil {
		f := &r.files[r.cur]
		out, err := r.fs.Create(r.fs.PathJoin(r.dir, f.name), vfs.WriteCategoryUnspecified)
		if err != nil {
			return err
		}
		r.out, r.outN, r.sum = out, 0, crc32.New(castagnoli)
		if err := r.closeFile(f); err != nil {
			return err
		}
	}
	if r.cur == len(r.files) && r.got == r.total {
		return syncDir(r.fs, r.dir)
	}
	return nil
}

// Close releases the file being written, if any (an abandoned stream).
func (r *Receiver) Close() error {
	if r.out == nil {
		return nil
	}
	err := r.out.Close()
	r.out = nil
	return err
}
