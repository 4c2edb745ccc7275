package history

import (
	"errors"
	"io"
	"strings"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// Restore makes dir a fresh copy of the checkpoint in from (hard links
// where fs allows), replacing what dir held. The store in dir must be
// closed. Tables (.sst) and blob files (.blob), which pebble never changes
// once written, are linked; every other file is copied, so that the store
// opened in dir cannot change the checkpoint. The copy is built and synced
// beside dir (dir+".restoring") and renamed into place, the old dir first
// renamed aside (dir+".old") and then removed: a crash at any moment leaves
// dir whole, the old store or the new one, or absent, never a part of one
// (Recover may open it as it is). Restore, and Recover, remove what a
// crash left of those two.
func Restore(fs vfs.FS, from, dir string) error {
	names, err := fs.List(from)
	if err != nil {
		return err
	}
	tmp, old := dir+".restoring", dir+".old"
	if err := fs.RemoveAll(tmp); err != nil {
		return err
	}
	if err := fs.MkdirAll(tmp, 0o755); err != nil {
		return err
	}
	for _, name := range names {
		src, dst := fs.PathJoin(from, name), fs.PathJoin(tmp, name)
		if strings.HasSuffix(name, ".sst") || strings.HasSuffix(name, ".blob") {
			if err := fs.Link(src, dst); err == nil {
				continue
			}
		}
		if err := copyFile(fs, src, dst); err != nil {
			return err
		}
	}
	if err := syncDir(fs, tmp); err != nil {
		return err
	}
	if err := fs.RemoveAll(old); err != nil {
		return err
	}
	if _, err := fs.Stat(dir); err == nil {
		if err := fs.Rename(dir, old); err != nil {
			return err
		}
	}
	if err := fs.Rename(tmp, dir); err != nil {
		return err
	}
	parent := fs.PathDir(dir)
	if err := syncDir(fs, parent); err != nil {
		return err
	}
	if err := fs.RemoveAll(old); err != nil {
		return err
	}
	return syncDir(fs, parent)
}

// copyFile copies src to a new file dst and syncs it.
func copyFile(fs vfs.FS, src, dst string) (err error) {
	in, err := fs.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := fs.Create(dst, vfs.WriteCategoryUnspecified)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		_ = out.Close()
		return err
	}
	return errors.Join(out.Sync(), out.Close())
}

func syncDir(fs vfs.FS, dir string) error {
	d, err := fs.OpenDir(dir)
	if err != nil {
		return err
	}
	return errors.Join(d.Sync(), d.Close())
}
