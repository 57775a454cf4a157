package pipeline

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The record of the items finds the one line edited, by its line number
// past blank lines, and not lines moved, added or removed; a record that
// is not one is an error naming its file.
func TestItemSumsFindEditedLines(t *testing.T) {
	def, items := writeDef(t, daily, 0)
	src := filepath.Join(def.Dir, "items.jsonl")
	run := t.TempDir()
	write := func(text string) []*Item {
		t.Helper()
		require.NoError(t, os.WriteFile(src, []byte(text), 0o644))
		var err error
		items, err = def.LoadItems()
		require.NoError(t, err)
		return items
	}
	sums, err := ItemSumsOf(write(`{"id": "a", "claim": "one"}` + "\n\n" + `{"id": "b", "claim": "two"}` + "\n" + `{"id": "c", "claim": "three"}` + "\n"))
	require.NoError(t, err)
	none, err := sums.Changed(run)
	require.NoError(t, err)
	assert.Empty(t, none, "nothing recorded yet")
	require.NoError(t, sums.Save(run))

	// b moved after c, a line added, c edited, a blank line more.
	sums, err = ItemSumsOf(write(`{"id": "a", "claim": "one"}` + "\n\n\n" + `{"id": "c", "claim": "three!"}` + "\n" + `{"id": "b", "claim": "two"}` + "\n" + `{"id": "d"}` + "\n"))
	require.NoError(t, err)
	changed, err := sums.Changed(run)
	require.NoError(t, err)
	assert.Equal(t, []ChangedItem{{Key: "c", Line: 4}}, changed)
	assert.Nil(t, items[0].vals.src.sums, "the lines' hashes are let go once recorded")

	require.NoError(t, os.WriteFile(filepath.Join(run, ItemSumsFile), []byte("fano-item-sums-1\n\x05"), 0o644))
	_, err = sums.Changed(run)
	require.Error(t, err)
	assert.Contains(t, err.Error(), filepath.Join(run, ItemSumsFile))
}
