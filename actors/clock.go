package actors

import "time"

// nanos and timeOf convert between event times (unix nanoseconds) and
// time.Time; zero stays zero.
func nanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func timeOf(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}
