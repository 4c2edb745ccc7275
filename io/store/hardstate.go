package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
)

// The hard state file "hardstate" is 32 bytes:
//
//	offset size field
//	     0    8 magic "GEOHST01"
//	     8    8 term
//	    16    8 commit index
//	    24    4 vote (replica index, or NoVote = 0xffffffff)
//	    28    4 CRC-32C of bytes 0..27
//
// It is replaced atomically: written to "hardstate.tmp", fsynced, renamed
// over "hardstate", directory fsynced. A leftover hardstate.tmp is ignored.
const (
	hardStateName  = "hardstate"
	hardStateMagic = "GEOHST01"
	hardStateSize  = 32
)

// NoVote is HardState.Vote when the replica has not voted in Term.
const NoVote = ^uint32(0)

// HardState is the state Raft must persist before answering: the current
// term, the vote cast in it, and the commit index.
type HardState struct {
	Term   uint64
	Vote   uint32 // replica index, or NoVote
	Commit uint64
}

func encodeHardState(hs HardState) []byte {
	b := make([]byte, hardStateSize)
	copy(b, hardStateMagic)
	binary.LittleEndian.PutUint64(b[8:16], hs.Term)
	binary.LittleEndian.PutUint64(b[16:24], hs.Commit)
	binary.LittleEndian.PutUint32(b[24:28], hs.Vote)
	binary.LittleEndian.PutUint32(b[28:32], crc32.Checksum(b[0:28], castagnoli))
	return b
}

// SaveHardState durably replaces the hard state in dir (temp file, fsync,
// rename, directory fsync).
func SaveHardState(dir string, hs HardState) error {
	return WriteFileAtomic(dir, hardStateName, encodeHardState(hs))
}

// LoadHardState reads the hard state in dir. ok is false when there is none
// (a new replica). A damaged file is a Corruption error naming it and the
// offset.
func LoadHardState(dir string) (hs HardState, ok bool, err error) {
	path := filepath.Join(dir, hardStateName)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return HardState{}, false, nil
	}
	if err != nil {
		return HardState{}, false, fmt.Errorf("store: read hard state: %w", err)
	}
	switch {
	case len(b) != hardStateSize:
		return HardState{}, false, corruptAt(path, int64(min(len(b), hardStateSize)), "hard state file is %d bytes, want %d", len(b), hardStateSize)
	case string(b[0:8]) != hardStateMagic:
		return HardState{}, false, corruptAt(path, 0, "bad hard state magic %q", b[0:8])
	case binary.LittleEndian.Uint32(b[28:32]) != crc32.Checksum(b[0:28], castagnoli):
		return HardState{}, false, corruptAt(path, 28, "hard state checksum mismatch")
	}
	return HardState{
		Term:   binary.LittleEndian.Uint64(b[8:16]),
		Commit: binary.LittleEndian.Uint64(b[16:24]),
		Vote:   binary.LittleEndian.Uint32(b[24:28]),
	}, true, nil
}
