package app

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A trace line is written byte for byte as encoding/json writes it: the
// escapes, the float forms, the omitted zero fields, and the errors.
func TestTraceLineAppendsWhatEncodingJSONWrites(t *testing.T) {
	at := time.Date(2026, 11, 28, 8, 30, 1, 120000000, time.UTC)
	lines := []traceLine{
		{},
		{Time: at, Backend: "api", Task: "pipeline/verdict/c0000001", Module: "pipeline", TaskType: "verdict", Turn: 1, Outcome: "ok",
			DurationMS: 0.042, PromptBytes: 31, AnswerBytes: 17, PromptTokens: 9, CompletionTokens: 5},
		{Time: at.Add(time.Nanosecond), Deep: true, Resend: true, Outcome: "rate_limited", DurationMS: 1500},
		{Time: time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("x", 3600)), Task: `a "quoted" \ task <b>&amp;`, Outcome: "tab\there\nnew\x00line\x7f"},
		{Task: "naïve ✓ \u2028 \u2029 é", Backend: "bad \xff utf-8 \xc3", Turn: -3, PromptBytes: -1},
		{DurationMS: 1e-7}, {DurationMS: 1e-6}, {DurationMS: 123456789012345678901.0}, {DurationMS: 1e21}, {DurationMS: 1.5e300},
		{DurationMS: -2.5e-9}, {DurationMS: math.SmallestNonzeroFloat64}, {DurationMS: math.MaxFloat64}, {DurationMS: 1.0 / 3},
		{PromptTokens: math.MaxInt64, CompletionTokens: math.MinInt64, Turn: math.MinInt32},
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		lines = append(lines, traceLine{
			Time:         time.Unix(0, r.Int64N(1<<62)).UTC(),
			Backend:      randomString(r),
			Task:         randomString(r),
			Turn:         r.Int32(),
			Deep:         r.IntN(2) == 0,
			Outcome:      randomString(r),
			DurationMS:   math.Float64frombits(r.Uint64()) / 1e300,
			PromptTokens: int64(r.IntN(3)) * r.Int64(),
		})
	}
	for i, l := range lines {
		want, wantErr := json.Marshal(l)
		got, err := l.appendJSON([]byte("prefix"))
		if wantErr != nil {
			require.Error(t, err, "line %d: %+v", i, l)
			continue
		}
		require.NoError(t, err, "line %d", i)
		require.Equal(t, "prefix"+string(want), string(got), "line %d: %+v", i, l)
	}
}

// Where encoding/json refuses a line, so does appendJSON.
func TestTraceLineRefusesWhatEncodingJSONRefuses(t *testing.T) {
	for _, l := range []traceLine{
		{DurationMS: math.NaN()}, {DurationMS: math.Inf(1)}, {DurationMS: math.Inf(-1)},
		{Time: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}, {Time: time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC)},
	} {
		_, wantErr := json.Marshal(l)
		require.Error(t, wantErr)
		_, err := l.appendJSON(nil)
		require.Error(t, err, "%+v", l)
	}
}

func randomString(r *rand.Rand) string {
	const pool = "abcXYZ09/_-. \"\\<>&\t\n\x01\x7f\xff\xc3é✓\u2028"
	b := make([]byte, r.IntN(12))
	for i := range b {
		b[i] = pool[r.IntN(len(pool))]
	}
	return string(b)
}
