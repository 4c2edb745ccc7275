//go:build linux && (amd64 || arm64 || riscv64 || loong64 || ppc64le)

package store

import (
	"os"
	"syscall"
	"unsafe"
)

// aioSyncers are AIO contexts, each with its eventfd, free for a
// fdatasync. One is made when none is free (a log and a snapshot may sync
// at once); a few are kept, the others closed, so that the contexts, which
// count against the system's aio-max-nr, stay few.
var aioSyncers = make(chan *aioSyncer, 4)

// aioSyncer is an AIO context of one request, whose completions are
// signalled on ev, an eventfd in non-blocking mode that Go's poller waits
// on.
type aioSyncer struct {
	ctx  uintptr
	ev   *os.File
	evFD uint32 // ev's descriptor (os.File.Fd would make ev blocking)
	cb   iocb
}

// iocb is struct iocb of linux/aio_abi.h, for a little-endian 64-bit
// machine (the fields aio_data, aio_key, aio_rw_flags, aio_lio_opcode,
// aio_reqprio, aio_fildes, aio_buf, aio_nbytes, aio_offset, aio_reserved2,
// aio_flags, aio_resfd: 64 bytes).
type iocb struct {
	data    uint64
	key     uint32
	rwFlags int32
	opcode  uint16
	prio    int16
	fd      uint32
	buf     uint64
	nbytes  uint64
	offset  int64
	_       uint64
	flags   uint32
	resfd   uint32
}

// ioEvent is struct io_event: the request's data and iocb, and its result
// (0, or a negated errno).
type ioEvent struct {
	data, obj uint64
	res, res2 int64
}

var _ [64 - unsafe.Sizeof(iocb{})]struct{}
var _ [unsafe.Sizeof(iocb{}) - 64]struct{}

const (
	iocbCmdFdsync = 3 // IOCB_CMD_FDSYNC
	iocbFlagResfd = 1 // IOCB_FLAG_RESFD: signal completion on resfd
)

// aioFdatasync fdatasyncs fd by AIO and waits for it without holding a
// processor. When the request was not started, started is false and err
// an *aioError: the AIO context could not be made, or io_submit refused
// the request. Otherwise err is the fdatasync's.
func aioFdatasync(fd uintptr) (started bool, err error) {
	var a *aioSyncer
	select {
	case a = <-aioSyncers:
	default:
		if a, err = setupAIO(); err != nil {
			return false, err
		}
	}
	started, err = a.fdatasync(fd)
	if started && err != nil {
		a.close() // the request's fate is unknown: do not reuse its context
		return true, err
	}
	select {
	case aioSyncers <- a:
	default:
		a.close()
	}
	return started, err
}

// setupAIO is newAIOSyncer; tests make it fail.
var setupAIO = newAIOSyncer

func newAIOSyncer() (*aioSyncer, error) {
	var ctx uintptr
	if _, _, e := syscall.Syscall(syscall.SYS_IO_SETUP, 1, uintptr(unsafe.Pointer(&ctx)), 0); e != 0 {
		return nil, &aioError{"io_setup", e}
	}
	fd, _, e := syscall.Syscall(syscall.SYS_EVENTFD2, 0, syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if e != 0 {
		syscall.Syscall(syscall.SYS_IO_DESTROY, ctx, 0, 0)
		return nil, &aioError{"eventfd2", e}
	}
	return &aioSyncer{ctx: ctx, ev: os.NewFile(fd, "aio-eventfd"), evFD: uint32(fd)}, nil
}

func (a *aioSyncer) close() {
	syscall.Syscall(syscall.SYS_IO_DESTROY, a.ctx, 0, 0)
	a.ev.Close()
}

// fdatasync submits the request and waits for its completion; started is
// false when io_submit refused it (err is then an *aioError).
func (a *aioSyncer) fdatasync(fd uintptr) (started bool, err error) {
	a.cb = iocb{opcode: iocbCmdFdsync, fd: uint32(fd), flags: iocbFlagResfd, resfd: a.evFD}
	p := &a.cb
	if _, _, e := syscall.Syscall(syscall.SYS_IO_SUBMIT, a.ctx, 1, uintptr(unsafe.Pointer(&p))); e != 0 {
		return false, &aioError{"io_submit", e}
	}
	var ev [1]ioEvent
	for {
		// The eventfd counts completions; reading it parks the goroutine
		// in the poller until there is one.
		var b [8]byte
		if _, err := a.ev.Read(b[:]); err != nil {
			return true, err
		}
		n, _, e := syscall.Syscall6(syscall.SYS_IO_GETEVENTS, a.ctx, 0, 1, uintptr(unsafe.Pointer(&ev[0])), 0, 0)
		if e == syscall.EINTR || (e == 0 && n == 0) {
			continue
		}
		if e != 0 {
			return true, e
		}
		break
	}
	if ev[0].res < 0 {
		return true, syscall.Errno(-ev[0].res)
	}
	return true, nil
}
