package remote

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
)

// promptJournal is a host's durable note of the prompts it handed to a
// browser backend and whether their answers came back. A host process
// that dies mid-answer leaves the prompt on the site's page; the next
// process reads the journal, and the orchestrator's next request of that
// task with that prompt is marked interrupted, so the browser reads the
// page for the answer before it types anything: the prompt is not sent
// twice because the host restarted.
type promptJournal struct {
	mu          sync.Mutex
	f           *os.File
	interrupted map[string]bool // task|prompt hash -> left in flight by an earlier process
}

type journalLine struct {
	Key  string `json:"k"`
	Done bool   `json:"done,omitempty"`
}

func promptKey(taskID, prompt string) string {
	h := sha256.Sum256([]byte(prompt))
	return taskID + "|" + hex.EncodeToString(h[:8])
}

// openPromptJournal reads path (what earlier processes left in flight)
// and starts it afresh with those.
func openPromptJournal(path string) (*promptJournal, error) {
	j := &promptJournal{interrupted: map[string]bool{}}
	if f, err := os.Open(path); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			var l journalLine
			if json.Unmarshal(sc.Bytes(), &l) != nil {
				continue // a line cut by the crash
			}
			if l.Done {
				delete(j.interrupted, l.Key)
			} else {
				j.interrupted[l.Key] = true
			}
		}
		f.Close()
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("prompt journal: %w", err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("prompt journal: %w", err)
	}
	j.f = f
	for k := range j.interrupted {
		if err := j.write(journalLine{Key: k}); err != nil {
			return nil, err
		}
	}
	return j, nil
}

func (j *promptJournal) write(l journalLine) error {
	data, _ := json.Marshal(l)
	if _, err := j.f.Write(append(data, '\n')); err != nil {
		return fmt.Errorf("prompt journal: %w", err)
	}
	return j.f.Sync()
}

// begin notes that the prompt of task goes to the browser now, and says
// whether an earlier process left the same prompt in flight.
func (j *promptJournal) begin(taskID, prompt string) (interrupted bool, err error) {
	k := promptKey(taskID, prompt)
	j.mu.Lock()
	defer j.mu.Unlock()
	interrupted = j.interrupted[k]
	delete(j.interrupted, k)
	return interrupted, j.write(journalLine{Key: k})
}

// done notes that the prompt's answer (or a fault that ended it) came
// back.
func (j *promptJournal) done(taskID, prompt string) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.write(journalLine{Key: promptKey(taskID, prompt), Done: true})
}

func (j *promptJournal) close() error {
	if j == nil || j.f == nil {
		return nil
	}
	return j.f.Close()
}
