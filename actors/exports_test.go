package actors

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// A file written from a stream replaces the old one whole, or not at all:
// a render that fails half-way leaves the old file and no temp file.
func TestWriteFileAtomicFromReplacesWholeOrNotAtAll(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out", "results.jsonl")
	require.NoError(t, WriteFileAtomic(path, []byte("old\n"), 0o644))

	big := strings.Repeat("a line of a large results file\n", 10000) // past the buffer
	require.NoError(t, WriteFileAtomicFrom(path, 0o644, func(w io.Writer) error {
		_, err := io.WriteString(w, big)
		return err
	}))
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, big, string(got))

	boom := errors.New("render failed")
	err = WriteFileAtomicFrom(path, 0o644, func(w io.Writer) error {
		_, _ = io.WriteString(w, strings.Repeat("x", 100000))
		return boom
	})
	require.ErrorIs(t, err, boom)
	got, err = os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, big, string(got), "the last whole file stays")
	entries, err := os.ReadDir(filepath.Dir(path))
	require.NoError(t, err)
	require.Len(t, entries, 1, "no temp file left")
}
