//go:build linux

package store

import (
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"syscall"
	"time"
)

// fdatasync flushes f's data and the metadata needed to read it back (the
// file size), skipping timestamps.
//
// It asks the kernel to do so asynchronously (Linux AIO, IOCB_CMD_FDSYNC,
// since Linux 4.18) and waits for the completion on an eventfd through Go's
// network poller, so that the goroutine parks and its processor (Go's P)
// runs other goroutines meanwhile. A plain fdatasync(2) keeps the
// processor for the whole call, until the runtime's monitor thread takes
// it back, which can be never for a short call: with one processor
// (GOMAXPROCS=1), a runtime trace of single-event HTTP upserts showed no
// other goroutine running during any of 2,372 fdatasyncs (p50 295 µs).
//
// Where AIO is unavailable it makes the plain call, and PlainSyncs says
// why (see aioVerdict for how long).
func fdatasync(f *os.File) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return f.Sync()
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		off := aioOff.Load()
		tryAIO := off == nil || (!off.until.IsZero() && !now().Before(off.until))
		var refused error
		if tryAIO {
			var started bool
			if started, serr = aioFdatasync(fd); started {
				if off != nil {
					aioOff.CompareAndSwap(off, nil) // AIO works again
				}
				return
			}
			refused = serr
		}
		for {
			serr = syscall.Fdatasync(int(fd))
			if serr != syscall.EINTR {
				break
			}
		}
		if refused != nil {
			noteAIORefusal(off, refused, serr == nil)
		}
	}); err != nil {
		return err
	}
	if serr != nil {
		return &os.PathError{Op: "fdatasync", Path: f.Name(), Err: serr}
	}
	return nil
}

// plainSyncs is why fdatasync makes the plain call, until when (zero: for
// good).
type plainSyncs struct {
	why   error
	until time.Time
}

// aioOff is set while fdatasync makes the plain call; nil while it uses
// AIO.
var aioOff atomic.Pointer[plainSyncs]

// now is time.Now; tests move it on.
var now = time.Now

// aioRetryDelay is how long fdatasync makes the plain call after AIO was
// short of a resource, before it tries AIO again.
const aioRetryDelay = 10 * time.Second

// PlainSyncs returns why storage's fsyncs currently make the plain
// fdatasync(2), which holds a Go processor for as long as the disk takes,
// or nil while they go by AIO and hold none (see the package doc). The
// reason reads the same for as long as the cause stays the same, so a
// caller can log its changes.
func PlainSyncs() error {
	if off := aioOff.Load(); off != nil {
		return off.why
	}
	return nil
}

// aioError is an AIO system call's failure: the call and its errno.
type aioError struct {
	call  string // "io_setup", "eventfd2" or "io_submit"
	errno syscall.Errno
}

func (e *aioError) Error() string { return e.call + ": " + e.errno.Error() }
func (e *aioError) Unwrap() error { return e.errno }

// noteAIORefusal records that an AIO fdatasync was not started, for the
// reason refused (an *aioError, or errNoAIO); off is aioOff as the
// fdatasync found it (nil, or a retry whose time had come), and plainOK
// says whether the plain call then synced the file.
func noteAIORefusal(off *plainSyncs, refused error, plainOK bool) {
	retry, forGood := aioVerdict(refused, plainOK)
	if !retry && !forGood {
		return
	}
	next := &plainSyncs{why: fmt.Errorf("asynchronous fdatasync unavailable: %w", refused)}
	if off != nil && off.why.Error() == next.why.Error() {
		next.why = off.why // the same cause: the same reason, for PlainSyncs' callers
	}
	if retry {
		next.until = now().Add(aioRetryDelay)
	}
	aioOff.CompareAndSwap(off, next)
}

// aioVerdict decides what a refused AIO fdatasync means for later ones:
//   - the system is short of AIO contexts (io_setup's EAGAIN: aio-max-nr
//     reached), of memory or of descriptors, or io_submit's queue is full:
//     retry after aioRetryDelay;
//   - the kernel has no AIO (ENOSYS, EPERM from a sandbox, errNoAIO for an
//     architecture this package has no iocb for), or refuses to sync by AIO
//     a file that the plain call syncs (io_submit's EINVAL before Linux
//     4.18): forGood;
//   - io_submit refused a file that the plain call cannot sync either (a
//     pipe): the file's fault, neither.
func aioVerdict(refused error, plainOK bool) (retry, forGood bool) {
	var ae *aioError
	if !errors.As(refused, &ae) {
		return false, true
	}
	switch ae.errno {
	case syscall.EAGAIN, syscall.ENOMEM, syscall.EMFILE, syscall.ENFILE:
		return true, false
	}
	if ae.call == "io_submit" && !plainOK {
		return false, false
	}
	return false, true
}
