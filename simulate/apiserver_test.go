package simulate

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"fano/gateway"
	"fano/gateway/api"
	"fano/gateway/sim"
)

// The real API gateway in front of a simulated service, in process: an
// answer, a 429 storm and a revoked key come out as the gateway reports
// a real provider's.
func TestAPIGatewayInFrontOfTheSimulatedService(t *testing.T) {
	clock := NewClock(Epoch)
	sb := NewBackend(sim.New(sim.Config{Name: "or", Style: "api", Seed: 1, HourlyLimit: 100}, clock), "api", clock, 1)
	gw, err := api.New(api.Config{Name: "or", BaseURL: "http://simulated.invalid/v1", Model: "m", APIKey: "k",
		Client: &http.Client{Transport: Transport(Handler(sb))}, Clock: clock})
	require.NoError(t, err)
	req := gateway.Request{TaskID: "explorer/exploration/t1", TaskType: "exploration", Prompt: "How many points has the Fano plane?"}
	send := func() (gateway.Response, error) { return gw.Send(WithRequest(context.Background(), req), req) }

	resp, err := send()
	require.NoError(t, err)
	require.NotEmpty(t, resp.Content)
	require.Positive(t, resp.CompletionTokens)

	storm := Fault{Entry: Entry{Kind: KindStorm, PerMin: 0}, Start: Epoch, End: Epoch.Add(time.Hour)}
	sb.Apply(storm, true)
	_, err = send()
	var rl *gateway.RateLimitedError
	require.True(t, errors.As(err, &rl), "a 429 is a rate limit: %v", err)
	require.Positive(t, rl.RetryAfter)
	sb.Apply(storm, false)

	sb.Apply(Fault{Entry: Entry{Kind: KindKeyRevoked}}, true)
	_, err = send()
	require.ErrorIs(t, err, gateway.ErrCredentials)
	sb.Apply(Fault{Entry: Entry{Kind: KindKeyRestored}}, true)
	_, err = send()
	require.NoError(t, err)
	require.Equal(t, int64(1), sb.Counts().Stormed)
}
