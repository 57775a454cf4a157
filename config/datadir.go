package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// CheckDataDir creates dir (mode 0700) if it is missing and checks that it
// is a directory fano can write to, by creating and removing a temporary
// file in it. Errors name the directory.
func CheckDataDir(dir string) error {
	if dir == "" {
		return errors.New("data dir: no directory given (set data_dir or --data-dir)")
	}
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("data dir %s: cannot create it: %w", dir, err)
		}
	case err != nil:
		return fmt.Errorf("data dir %s: %w", dir, err)
	case !fi.IsDir():
		return fmt.Errorf("data dir %s: exists but is not a directory", dir)
	}
	f, err := os.CreateTemp(dir, ".fano-write-check-*")
	if err != nil {
		return fmt.Errorf("data dir %s: not writable: %w", dir, err)
	}
	name := f.Name()
	cerr := f.Close()
	rerr := os.Remove(name)
	if cerr != nil {
		return fmt.Errorf("data dir %s: not writable: %w", dir, cerr)
	}
	if rerr != nil {
		return fmt.Errorf("data dir %s: cannot remove a file in it: %w", dir, rerr)
	}
	return nil
}
