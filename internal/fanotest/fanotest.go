// Package fanotest is test support shared by fano's packages: the pieces
// of an in-process fano (a WAL, sim backends, the persisted events; see
// pieces.go) and, for tests that run real `fano` subprocesses, the binary
// built once per test package and the JSON log those processes write.
package fanotest

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Binary is a fano binary built for one test package.
type Binary struct {
	Path string
	err  error
}

// Main builds fano/cmd/fano into a temporary directory, runs the package's
// tests and exits; use it as the whole of TestMain. A failed build fails
// the tests that call Require, with the compiler's output.
func Main(m *testing.M, bin *Binary) {
	dir, err := os.MkdirTemp("", "fano-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bin.Path = filepath.Join(dir, "fano")
	if out, err := exec.Command("go", "build", "-o", bin.Path, "fano/cmd/fano").CombinedOutput(); err != nil {
		bin.err = fmt.Errorf("go build fano/cmd/fano: %v\n%s", err, out)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// Require returns the binary's path, or fails t if it could not be built.
func (b *Binary) Require(t testing.TB) string {
	t.Helper()
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.Path
}

// LogHas reports whether the JSON log at path has an entry of event whose
// line also contains every string of and.
func LogHas(path, event string, and ...string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	needle := `"event":"` + event + `"`
	for sc.Scan() {
		line := sc.Text()
		if strings.Contains(line, needle) && !slices.ContainsFunc(and, func(s string) bool { return !strings.Contains(line, s) }) {
			return true
		}
	}
	return false
}
