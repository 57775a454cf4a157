package metrics

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// A task id splits into its module and "module/task_type" whatever its
// slashes, and without allocating.
func TestSplitTakesModuleAndKindOfAnID(t *testing.T) {
	for _, c := range []struct{ id, module, kind string }{
		{"", "", ""},
		{"pipeline", "pipeline", "pipeline"},
		{"pipeline/pipeline_llm", "pipeline", "pipeline/pipeline_llm"},
		{"pipeline/pipeline_llm/c0000001", "pipeline", "pipeline/pipeline_llm"},
		{"explorer/critique/a/b/c", "explorer", "explorer/critique"},
		{"a//c", "a", "a/"},
		{"/x", "", "/x"},
		{"/", "", "/"},
		{"//", "", "/"},
		{"a/", "a", "a/"},
	} {
		module, kind := split(c.id)
		require.Equal(t, c.module, module, "module of %q", c.id)
		require.Equal(t, c.kind, kind, "kind of %q", c.id)
	}
	id := strings.Repeat("x", 3) + "/type/subject"
	require.Zero(t, testing.AllocsPerRun(100, func() { split(id) }))
}
