package refusal

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDefaultPatterns(t *testing.T) {
	m := Default()
	for _, bad := range []string{
		"Sorry, I can't help with that.",
		"I'm sorry, but I cannot assist with this request.",
		"I can't help with that.",
		"  ",
		"",
		"As an AI language model, I cannot browse.",
		"Something went wrong. Please try again.",
	} {
		_, isBad := m.Bad(bad)
		assert.True(t, isBad, "%q", bad)
	}
	for _, good := range []string{
		"The Fano plane has 7 points and 7 lines.",
		"Sorry, I can't give a full proof here, but the key step is this: " + strings.Repeat("each line has three points. ", 20),
		"I can't stress enough that every two lines meet in exactly one point.",
	} {
		_, isBad := m.Bad(good)
		assert.False(t, isBad, "%q", good)
	}
}

func TestOverrideFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "refusals.txt")
	require.NoError(t, os.WriteFile(path, []byte("# mine\n^nope\n"), 0o600))
	m, err := Load(path)
	require.NoError(t, err)
	_, bad := m.Bad("Nope.")
	assert.True(t, bad)
	_, bad = m.Bad("Sorry, I can't help with that.")
	assert.False(t, bad, "the file replaces the defaults")

	require.NoError(t, os.WriteFile(path, []byte("ok\n(broken\n"), 0o600))
	_, err = Load(path)
	require.ErrorContains(t, err, path+":2")
	_, err = Load(filepath.Join(t.TempDir(), "missing.txt"))
	require.Error(t, err)
}

// The reason quotes a long refusal cut at a character boundary: it ends
// up in a WAL event, whose strings must be valid UTF-8.
func TestClipKeepsCharacters(t *testing.T) {
	s := "x" + strings.Repeat("é", 60) // byte 80 falls inside a character
	c := clip(s)
	assert.True(t, utf8.ValidString(c), c)
	assert.Less(t, len(c), len(s))
}
