//go:build !unix

package wal

import (
	"errors"
	"os"
)

func lockExclusive(*os.File) error { return errors.New("restore needs flock (unix only)") }
