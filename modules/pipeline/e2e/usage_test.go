package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A run's cost comes from the token usage the API reported for each
// answer (100 prompt and 20 completion tokens here), not from an
// estimate of the sizes: the module decides on an answer before the
// answer's saved event is applied, so the count must reach it first.
func TestCostIsFromTheReportedUsage(t *testing.T) {
	fano.Require(t)
	srv := &rpmServer{limit: 100000}
	hs := httptest.NewServer(srv)
	defer hs.Close()
	cfg := fmt.Sprintf(`
backends:
  api: {type: api, hourly_limit: 100000, max_concurrency: 8, api: {base_url: %s/v1, model: m, api_key_env: FANO_TEST_KEY, initial_rpm: 60000}}
explorer: {enabled: false}
documenter: {enabled: false}
researcher: {enabled: false}
control: {enabled: false}
logging: {level: warn, console: json}
`, hs.URL)
	def := `
name: usage
items: {source: items.jsonl, key: id}
models: [api]
prices: {api: {input: 1000, output: 10000}}
steps:
  - name: verdict
    llm:
      prompt: 'Is this claim true? {{.item.claim}}'
      schema: {type: object, required: [verdict], properties: {verdict: {type: boolean}}}
`
	const items = 40
	e := newEnv(t, def, cfg, items)
	cmd := e.cmd(context.Background(), "pipeline", "run", e.def, "--no-progress", "--json")
	cmd.Env = append(os.Environ(), "FANO_TEST_KEY=test-key-not-secret")
	out, err := cmd.Output()
	require.NoError(t, err, "%s", out)
	var sum struct {
		ItemsDone int     `json:"items_done"`
		Cost      float64 `json:"cost_usd"`
	}
	require.NoError(t, json.Unmarshal(out, &sum), "%s", out)
	assert.Equal(t, items, sum.ItemsDone)
	// Each answer: 100 tokens at $1000/M and 20 at $10000/M.
	assert.InDelta(t, items*(100*1000+20*10000)/1e6, sum.Cost, 1e-9)
}
