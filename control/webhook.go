package control

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
)

// Webhook is where alerts that need a person are posted (control.alerts_webhook).
type Webhook struct {
	// URL receives a JSON POST per alert raised or resolved. Its body has
	// "text" (Slack, Mattermost and most chat webhooks show it); with
	// Topic set it also has ntfy's "topic", "title" and "message", for
	// ntfy's JSON publishing at the server's root URL.
	URL   string
	Topic string
	// Timeout bounds one POST (default 10 s).
	Timeout time.Duration
}

// webhookBody is the JSON posted.
type webhookBody struct {
	Text    string `json:"text"`
	Topic   string `json:"topic,omitempty"`
	Title   string `json:"title,omitempty"`
	Message string `json:"message,omitempty"`
}

// webhookQueue bounds the posts waiting: alerts are rare, and a hook that
// does not answer must not hold memory.
const webhookQueue = 64

// notifier posts alert changes to the webhook from its own goroutine. The
// URL is never logged: chat webhooks carry their secret in it.
type notifier struct {
	hook   Webhook
	client *http.Client
	logger zerolog.Logger
	queue  chan webhookBody
	wg     sync.WaitGroup
	stop   chan struct{}
	once   sync.Once
}

func newNotifier(h Webhook, logger zerolog.Logger) *notifier {
	if h.Timeout <= 0 {
		h.Timeout = 10 * time.Second
	}
	n := &notifier{hook: h, client: &http.Client{Timeout: h.Timeout}, logger: logger,
		queue: make(chan webhookBody, webhookQueue), stop: make(chan struct{})}
	n.wg.Add(1)
	go n.loop()
	return n
}

// alertText is the webhook's line for a change.
func alertText(c change) (title, text string) {
	a := c.Alert
	if c.Resolved {
		title = "fano: resolved: " + a.Kind
		text = "Resolved: " + a.Message
		if a.Resolution != "" && a.Resolution != a.Message {
			text += " (" + a.Resolution + ")"
		}
		return title, text
	}
	title = "fano needs you: " + a.Kind
	text = "fano needs a person: " + a.Message
	if a.Action != "" {
		text += ". To do: " + a.Action
	}
	return title, text
}

// offer queues a post for c if it concerns a person; it never blocks.
func (n *notifier) offer(c change) {
	if !c.Alert.Person {
		return
	}
	title, text := alertText(c)
	b := webhookBody{Text: text}
	if n.hook.Topic != "" {
		b.Topic, b.Title, b.Message = n.hook.Topic, title, text
	}
	select {
	case n.queue <- b:
	default:
		n.logger.Warn().Str("event", "control.alerts.webhook_dropped").Str("kind", c.Alert.Kind).Msg("alert webhook queue full: alert not posted")
	}
}

func (n *notifier) loop() {
	defer n.wg.Done()
	for {
		select {
		case b := <-n.queue:
			if err := n.post(b); err != nil {
				n.logger.Warn().Err(err).Str("event", "control.alerts.webhook_failed").Msg("alert webhook")
			}
		case <-n.stop:
			return
		}
	}
}

// post sends one body. Errors name the host only, never the URL's path or
// query (where chat webhooks keep their secret).
func (n *notifier) post(b webhookBody) error {
	data, err := json.Marshal(b)
	if err != nil {
		return fmt.Errorf("alert webhook: encode: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), n.hook.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, n.hook.URL, bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("alert webhook: the URL in control.alerts_webhook does not parse")
	}
	host := req.URL.Host
	req.Header.Set("Content-Type", "application/json")
	resp, err := n.client.Do(req)
	if err != nil {
		msg := err.Error()
		msg = strings.ReplaceAll(msg, n.hook.URL, host)
		return fmt.Errorf("alert webhook to %s: %s", host, msg)
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("alert webhook to %s: answered %s", host, resp.Status)
	}
	return nil
}

func (n *notifier) close() {
	n.once.Do(func() {
		close(n.stop)
		n.wg.Wait()
	})
}
