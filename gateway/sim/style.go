package sim

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"
)

// voice is the tone of one simulated service: how its answers open, link
// paragraphs and close, and what its rate-limit banner says.
type voice struct {
	openers     []string // first sentence of prose; "" = none
	transitions []string // start of a body paragraph
	hedges      []string // softeners before a detail
	closers     []string // last sentence of the closing paragraph
	emphasis    func(string) string
	fenceJSON   float64 // chance that JSON answers come inside a ```json fence
	hourBanner  string  // %s = reset time
	deepBanner  string  // %s = reset time
	noDeep      string
}

var voices = map[string]voice{
	"chatgpt": {
		openers: []string{
			"Great question!",
			"Sure — here's a structured look at it.",
			"Absolutely, let's dig in.",
		},
		transitions: []string{"Next, ", "Another key point: ", "It also helps to note that ", "On top of that, "},
		hedges:      []string{"Concretely, ", "In practice, ", "To put it simply, "},
		closers: []string{
			"If you'd like, I can work through a concrete example next.",
			"Want me to turn this into a short proof sketch?",
			"Let me know if you want the details of any step.",
		},
		emphasis:   func(s string) string { return "**" + s + "**" },
		fenceJSON:  0.7,
		hourBanner: "You've reached our limit of messages per hour. Please try again after %s.",
		deepBanner: "You've reached the current usage cap for deep research. You can use it again after %s.",
		noDeep:     "Deep research is not available on your plan. Upgrade or try again after %s.",
	},
	"gemini": {
		openers: []string{
			"Here's a breakdown of the key ideas.",
			"Let's break this down.",
			"This touches on a classic topic in finite geometry.",
		},
		transitions: []string{"Key point: ", "Building on this, ", "Importantly, ", "Additionally, "},
		hedges:      []string{"In other words, ", "Notably, ", "For context, "},
		closers: []string{
			"Would you like to explore how this generalises to planes of higher order?",
			"I can also compare this with the situation in other finite geometries.",
			"Let me know which direction you'd like to take this.",
		},
		emphasis:   func(s string) string { return "**" + s + "**" },
		fenceJSON:  0.5,
		hourBanner: "You've reached your limit for now. Your limit resets at %s.",
		deepBanner: "You've reached your Deep Research limit. It resets at %s.",
		noDeep:     "Deep Research isn't available for this account right now. Try again after %s.",
	},
	"claude": {
		openers: []string{
			"",
			"This is a nice question, and the answer has a few layers.",
			"I'll take this in steps.",
		},
		transitions: []string{"It's worth noting that ", "A related point: ", "I think the cleanest way to see the next part is this: ", "Separately, "},
		hedges:      []string{"Roughly speaking, ", "As I understand it, ", "To be careful here: "},
		closers: []string{
			"One caveat: I'd want to check the edge cases before relying on this in a proof.",
			"I'm fairly confident in the statements above, but the references are worth double-checking.",
			"Happy to go deeper on whichever part is most useful.",
		},
		emphasis:   func(s string) string { return "*" + s + "*" },
		fenceJSON:  0.4,
		hourBanner: "You are out of messages until %s.",
		deepBanner: "You've used all your extended research for today. It will be available again at %s.",
		noDeep:     "Extended research is not included in your plan. Try again after %s.",
	},
	"api": {
		openers:     []string{""},
		transitions: []string{"", "Also, ", "Further, "},
		hedges:      []string{""},
		closers:     []string{""},
		emphasis:    func(s string) string { return s },
		fenceJSON:   0,
		hourBanner:  "rate limit exceeded; window resets at %s",
		deepBanner:  "deep mode quota exceeded; resets at %s",
		noDeep:      "deep mode unavailable; next window at %s",
	},
}

// voiceFor returns the voice of style; unknown styles speak like "api".
func voiceFor(style string) voice {
	if v, ok := voices[strings.ToLower(style)]; ok {
		return v
	}
	return voices["api"]
}

func pick(r *rand.Rand, xs []string) string {
	if len(xs) == 0 {
		return ""
	}
	return xs[r.IntN(len(xs))]
}

// banner renders a rate-limit message with the reset time, as a chat UI
// would show it.
func banner(format string, reset time.Time) string {
	return fmt.Sprintf(format, reset.UTC().Format("15:04 MST"))
}
