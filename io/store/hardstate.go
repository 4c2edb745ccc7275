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

// The hard state file "hardstate" is 36 bytes:
//
//	offset size field
//	     0    8 magic "GEOHST02"
//	     8    8 term
//	    16    8 commit index
//	    24    4 vote (replica index, or NoVote = 0xffffffff)
//	    28    4 flags: bit 0 repairing (core.HardState.Repairing); others 0
//	    32    4 CRC-32C of bytes 0..31
//
// The first version, "GEOHST01", was 32 bytes: the same without flags, its
// CRC at 28. It is still read.
//
// It is replaced atomically: written to "hardstate.tmp", fsynced, renamed
// over "hardstate", directory fsynced. A leftover hardstate.tmp is ignored.
const (
	hardStateName  = "hardstate"
	hardStateMagic = "GEOHST02"
	hardStateSize  = 36
	hardStateV1    = "GEOHST01"
	hardStateV1Len = 32
	flagRepairing  = 1
)

// NoVote is HardState.Vote when the replica has not voted in Term.
const NoVote = ^uint32(0)

// HardState is the state Raft must persist before answering: the current
// term, the vote cast in it, and the commit index.
type HardState struct {
	Term      uint64
	Vote      uint32 // replica index, or NoVote
	Commit    uint64
	Repairing bool // see core.HardState
}

func encodeHardState(hs HardState) []byte {
	b := make([]byte, hardStateSize)
	copy(b, hardStateMagic)
	binary.LittleEndian.PutUint64(b[8:16], hs.Term)
	binary.LittleEndian.PutUint64(b[16:24], hs.Commit)
	binary.LittleEndian.PutUint32(b[24:28], hs.Vote)
	if hs.Repairing {
		binary.LittleEndian.PutUint32(b[28:32], flagRepairing)
	}
	binary.LittleEndian.PutUint32(b[32:36], crc32.Checksum(b[0:32], castagnoli))
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
	size, flags := hardStateSize, uint32(0)
	if len(b) >= 8 && string(b[0:8]) == hardStateV1 {
		size = hardStateV1Len
	}
	switch {
	case len(b) != size:
		return HardState{}, false, corruptAt(path, int64(min(len(b), size)), "hard state file is %d bytes, want %d", len(b), size)
	case size == hardStateSize && string(b[0:8]) != hardStateMagic:
		return HardState{}, false, corruptAt(path, 0, "bad hard state magic %q", b[0:8])
	case binary.LittleEndian.Uint32(b[size-4:size]) != crc32.Checksum(b[0:size-4], castagnoli):
		return HardState{}, false, corruptAt(path, int64(size-4), "hard state checksum mismatch")
	case size == hardStateSize:
		flags = binary.LittleEndian.Uint32(b[28:32])
		if flags&^flagRepairing != 0 {
			return HardState{}, false, corruptAt(path, 28, "unknown hard state flags %#x", flags)
		}
	}
	return HardState{
		Term:      binary.LittleEndian.Uint64(b[8:16]),
		Commit:    binary.LittleEndian.Uint64(b[16:24]),
		Vote:      binary.LittleEndian.Uint32(b[24:28]),
		Repairing: flags&flagRepairing != 0,
	}, true, nil
}
