package browser

import (
	"fmt"
	"strings"

	"fano/gateway"
)

// Defaults for priming a new conversation with a task's history.
const (
	defaultPrimeTurns = 6
	defaultPrimeChars = 2000
)

// primePrompt returns the prompt for the first message of a new web
// conversation of a task that already has history (it moved here from
// another backend, or its conversation vanished): a compact transcript of
// the last turns (at most turns answers; each message cut to maxChars)
// before the prompt, and how many answers the transcript holds. No
// history or turns < 0: the prompt as it is and 0.
func primePrompt(history []gateway.Message, prompt string, turns, maxChars int) (string, int) {
	if turns <= 0 || len(history) == 0 {
		return prompt, 0
	}
	start, answers := len(history), 0
	for start > 0 {
		if history[start-1].Role == "assistant" {
			if answers == turns {
				break
			}
			answers++
		}
		start--
	}
	if answers == 0 {
		return prompt, 0
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "[This continues an earlier conversation that cannot be opened here. Its last %d turn(s), for context:]\n\n", answers)
	for _, m := range history[start:] {
		role := "User"
		if m.Role == "assistant" {
			role = "Assistant"
		}
		text := strings.TrimSpace(m.Content)
		if r := []rune(text); len(r) > maxChars {
			text = string(r[:maxChars]) + fmt.Sprintf(" [… %d characters left out]", len(r)-maxChars)
		}
		fmt.Fprintf(&sb, "%s: %s\n\n", role, text)
	}
	sb.WriteString("[End of the earlier conversation. The new message:]\n\n")
	sb.WriteString(prompt)
	return sb.String(), answers
}
