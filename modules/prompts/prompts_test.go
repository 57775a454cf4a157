package prompts

import (
	"os"
	"path/filepath"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"
)

type greet struct{ Name string }

func fsys() fstest.MapFS {
	return fstest.MapFS{"p/hello.tmpl": {Data: []byte("Hello {{.Name}}, {{clip 5 \"a very long text\"}}")}}
}

func TestLoadRenderAndOverride(t *testing.T) {
	s, err := Load("explorer", fsys(), "p", []string{"hello"}, map[string]any{"hello": greet{"x"}}, "")
	require.NoError(t, err)
	out, err := s.Render("hello", greet{"Fano"})
	require.NoError(t, err)
	require.Equal(t, "Hello Fano, a ver …\n", out)

	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "hello.tmpl"), []byte("Hi {{.Name}}"), 0o600))
	s, err = Load("explorer", fsys(), "p", []string{"hello"}, map[string]any{"hello": greet{"x"}}, dir)
	require.NoError(t, err)
	out, err = s.Render("hello", greet{"Fano"})
	require.NoError(t, err)
	require.Equal(t, "Hi Fano\n", out)
}

// A bad override names its file; an unknown file in the override dir is an
// error naming it; so is a missing override dir.
func TestBadOverridesNameTheirFile(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "hello.tmpl")
	require.NoError(t, os.WriteFile(bad, []byte("Hi {{.Nope}}"), 0o600))
	_, err := Load("explorer", fsys(), "p", []string{"hello"}, map[string]any{"hello": greet{"x"}}, dir)
	require.ErrorContains(t, err, bad)

	dir = t.TempDir()
	stray := filepath.Join(dir, "goodbye.tmpl")
	require.NoError(t, os.WriteFile(stray, []byte("x"), 0o600))
	_, err = Load("explorer", fsys(), "p", []string{"hello"}, map[string]any{"hello": greet{"x"}}, dir)
	require.ErrorContains(t, err, stray)

	_, err = Load("explorer", fsys(), "p", []string{"hello"}, map[string]any{"hello": greet{"x"}}, filepath.Join(dir, "missing"))
	require.ErrorContains(t, err, "missing")
}
