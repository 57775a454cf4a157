package api

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"fano/gateway"
)

// readStream reads a server-sent-events answer: "data: {chunk}" events
// whose choices[0].delta.content pieces make the answer, an optional usage
// chunk, and "data: [DONE]" at the end. Comment lines (": keep-alive")
// are skipped. A stream that ends without [DONE], breaks off, or carries
// a chunk that is not JSON was cut: a transient fault (errors.Is
// gateway.ErrCut) naming the backend, with the text so far in a response
// that ended EndCut, never a whole answer. An error object in the stream
// is read by the recogniser table, as in a 200.
func (b *Backend) readStream(ctx, rctx context.Context, req gateway.Request, h http.Header, body io.Reader) (gateway.Response, error) {
	r := bufio.NewReaderSize(io.LimitReader(body, b.cfg.MaxAnswerBytes+1), 64<<10)
	var (
		text    strings.Builder
		out     gateway.Response
		data    []string // data lines of the event being read
		events  int
		finish  string // the last finish_reason a chunk gave
		refusal strings.Builder
		choices bool // a chunk held a choice (else the stream said nothing of an answer)
	)
	cutOff := func(format string, args ...any) error {
		out.Content, out.Ended = text.String(), gateway.EndCut
		return gateway.TransientFault(b.cfg.Name,
			fmt.Sprintf("task %s: answer cut off mid-stream after %d events (%d chars): %s", req.TaskID, events, text.Len(), fmt.Sprintf(format, args...)),
			b.clock.Now().Add(gateway.TransientPause), gateway.ErrCut)
	}
	// dispatch handles one complete event; done reports [DONE].
	dispatch := func() (done bool, err error) {
		if len(data) == 0 {
			return false, nil
		}
		payload := strings.Join(data, "\n")
		data = data[:0]
		events++
		if strings.TrimSpace(payload) == "[DONE]" {
			return true, nil
		}
		var chunk chatResponse
		if err := json.Unmarshal([]byte(payload), &chunk); err != nil {
			return false, cutOff("event %d is not valid JSON (%d bytes)", events, len(payload))
		}
		if chunk.Error != nil {
			out.Content, out.Ended = text.String(), gateway.EndErrorTurn
			return false, b.errorInAnswer(req, h, []byte(payload))
		}
		if len(chunk.Choices) > 0 {
			choices = true
			text.WriteString(string(chunk.Choices[0].Delta.Content))
			// Some servers put the whole message in the last chunk.
			text.WriteString(string(chunk.Choices[0].Message.Content))
			refusal.WriteString(chunk.Choices[0].Delta.Refusal)
			refusal.WriteString(chunk.Choices[0].Message.Refusal)
			if r := chunk.Choices[0].FinishReason; r != "" {
				finish = r
			}
		}
		if chunk.Usage != nil {
			out.PromptTokens, out.CompletionTokens = chunk.Usage.PromptTokens, chunk.Usage.CompletionTokens
		}
		return false, nil
	}

	var read int64
	for done := false; !done; {
		line, rerr := r.ReadString('\n')
		read += int64(len(line))
		if read > b.cfg.MaxAnswerBytes {
			return gateway.Response{}, gateway.Transient(b.cfg.Name, "task %s: streamed answer larger than %d bytes", req.TaskID, b.cfg.MaxAnswerBytes)
		}
		if rerr != nil && !errors.Is(rerr, io.EOF) {
			if ctx.Err() != nil || rctx.Err() != nil {
				return gateway.Response{}, b.transportError(ctx, rctx, req, "reading the stream", rerr)
			}
			return out, cutOff("%v", redactedError{rerr, b.apiKey().Reveal()})
		}
		line = strings.TrimRight(line, "\r\n")
		var err error
		switch {
		case line == "":
			done, err = dispatch()
		case strings.HasPrefix(line, ":"):
			// comment / keep-alive
		case strings.HasPrefix(line, "data:"):
			data = append(data, strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " "))
		default:
			// event:, id:, retry: fields carry nothing we use.
		}
		if err != nil {
			return out, err
		}
		if rerr != nil && !done {
			// The stream ended: a pending event without its blank line
			// still counts, but only [DONE] makes the answer complete.
			if done, err = dispatch(); err != nil {
				return out, err
			}
			if !done {
				return out, cutOff("no [DONE]")
			}
		}
	}
	out.Content = text.String()
	out.Ended = endingOf(finish) // only [DONE] leaves the loop without an error
	if out.Ended != gateway.EndComplete {
		return out, b.stopped(req, out)
	}
	if strings.TrimSpace(out.Content) == "" {
		if !choices {
			// Like a body without a choice: the provider's or a proxy's
			// failure, not the model's answer.
			return gateway.Response{}, gateway.Transient(b.cfg.Name, "task %s: empty answer (the stream held no choice)", req.TaskID)
		}
		return gateway.Response{}, b.saidNothing(req, refusal.String(), finish)
	}
	return out, nil
}
