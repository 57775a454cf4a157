package e2e

import (
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// `fano pipeline init` writes a commented example that validates and runs
// offline on the built-in simulated models, and never overwrites a file.
func TestInitWritesARunnableExample(t *testing.T) {
	bin := fano.Require(t)
	dir := t.TempDir()
	def := filepath.Join(dir, "p.yaml")
	data := filepath.Join(dir, "run")
	out, err := exec.Command(bin, "pipeline", "init", def).CombinedOutput()
	require.NoError(t, err, "%s", out)
	out, err = exec.Command(bin, "pipeline", "validate", def).CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Contains(t, string(out), "ok")
	out, err = exec.Command(bin, "--data-dir", data, "pipeline", "run", def, "--no-progress").CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Contains(t, string(out), "5 of 5 items done")
	assert.Len(t, lines(t, filepath.Join(data, "output", "results.jsonl")), 5)
	assert.FileExists(t, filepath.Join(data, "pipeline.yaml"), "the definition's snapshot")

	out, err = exec.Command(bin, "pipeline", "init", def).CombinedOutput()
	require.Error(t, err)
	assert.Contains(t, string(out), "exists")
}
