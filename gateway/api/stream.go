package api

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"fano/gateway"
)

// readStream reads a server-sent-events answer: "data: {chunk}" events
// whose choices[0].delta.content pieces make the answer, an optional usage
// chunk, and "data: [DONE]" at the end. Comment lines (": keep-alive")
// are skipped. A stream that ends without [DONE], breaks off, or carries
// a chunk that is not JSON was cut off: Transient, naming the backend.
func (b *Backend) readStream(ctx, rctx context.Context, req gateway.Request, body io.Reader) (gateway.Response, error) {
	r := bufio.NewReaderSize(io.LimitReader(body, b.cfg.MaxAnswerBytes+1), 64<<10)
	var (
		text   strings.Builder
		out    gateway.Response
		data   []string // data lines of the event being read
		events int
	)
	cutOff := func(format string, args ...any) error {
		return gateway.Transient(b.cfg.Name, "task %s: answer cut off mid-stream after %d events: %s", req.TaskID, events, fmt.Sprintf(format, args...))
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
			return false, gateway.Transient(b.cfg.Name, "task %s: provider error in stream: %s", req.TaskID, b.clip(chunk.Error.Message))
		}
		if len(chunk.Choices) > 0 {
			text.WriteString(string(chunk.Choices[0].Delta.Content))
			// Some servers put the whole message in the last chunk.
			text.WriteString(string(chunk.Choices[0].Message.Content))
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
			return gateway.Response{}, cutOff("%v", redactedError{rerr, b.apiKey().Reveal()})
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
			return gateway.Response{}, err
		}
		if rerr != nil && !done {
			// The stream ended: a pending event without its blank line
			// still counts, but only [DONE] makes the answer complete.
			if done, err = dispatch(); err != nil {
				return gateway.Response{}, err
			}
			if !done {
				return gateway.Response{}, cutOff("no [DONE]")
			}
		}
	}
	out.Content = text.String()
	out.Ended = gateway.EndComplete // only [DONE] leaves the loop without an error
	if strings.TrimSpace(out.Content) == "" {
		return gateway.Response{}, gateway.Transient(b.cfg.Name, "task %s: empty answer (stream had no content)", req.TaskID)
	}
	return out, nil
}
