package remote

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A prompt handed to a browser whose answer never came back is found by
// the next process (once); one whose answer came back is not.
func TestPromptJournal(t *testing.T) {
	path := filepath.Join(t.TempDir(), "prompts.jsonl")
	j, err := openPromptJournal(path)
	require.NoError(t, err)
	again, err := j.begin("task/1", "prompt A")
	require.NoError(t, err)
	assert.False(t, again)
	_, err = j.begin("task/2", "prompt B")
	require.NoError(t, err)
	require.NoError(t, j.done("task/2", "prompt B"))
	require.NoError(t, j.close()) // the process dies with prompt A on the page

	// A line cut by the crash is skipped.
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteString(`{"k":"task/3|ab`)
	require.NoError(t, err)
	f.Close()

	j, err = openPromptJournal(path)
	require.NoError(t, err)
	again, err = j.begin("task/1", "prompt A")
	require.NoError(t, err)
	assert.True(t, again, "left in flight by the earlier process")
	again, _ = j.begin("task/2", "prompt B")
	assert.False(t, again, "its answer came back")
	again, _ = j.begin("task/1", "another prompt")
	assert.False(t, again, "another prompt of the task")
	require.NoError(t, j.close())

	// Still in flight across one more restart until its answer comes.
	j, err = openPromptJournal(path)
	require.NoError(t, err)
	again, _ = j.begin("task/1", "prompt A")
	assert.True(t, again)
	fi, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
}
