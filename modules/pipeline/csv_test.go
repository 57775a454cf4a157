package pipeline

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// JSONL becomes CSV with key and status first, then a column per leaf in
// the order they first appear; a missing value is an empty cell, an
// array one cell of JSON, numbers as written.
func TestJSONLToCSV(t *testing.T) {
	in := `{"key":"a","status":"done","steps":{"v":{"m1":{"ok":true,"p":0.25}},"tags":{"w":["x","y"]}},"cost_usd":1e-05}
{"key":"b","status":"failed","steps":{},"failed":{"v":{"m1":"timeout"}},"cost_usd":0}
`
	var out bytes.Buffer
	require.NoError(t, JSONLToCSV([]byte(in), &out))
	assert.Equal(t, "key,status,cost_usd,steps.tags.w,steps.v.m1.ok,steps.v.m1.p,failed.v.m1\n"+
		"a,done,1e-05,\"[\"\"x\"\",\"\"y\"\"]\",true,0.25,\n"+
		"b,failed,0,,,,timeout\n", out.String())
	require.ErrorContains(t, JSONLToCSV([]byte("{\"key\":1}\nnot json\n"), &out), "line 2")
}
