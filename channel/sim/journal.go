package sim

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
)

// The state directory's modes: its owner's only, like the data directory it usually sits in.
const (
	stateDirMode  fs.FileMode = 0o700
	stateFileMode fs.FileMode = 0o600
)

// journalFile is the journal's name in the state directory.
const journalFile = "journal.jsonl"

// journalRecord is one line of the journal: the whole new state of one object, named by its
// kind and id, or its end (Gone). Replaying the journal keeps the last record of each object.
type journalRecord struct {
	Kind  string          `json:"kind"`
	ID    string          `json:"id"`
	Gone  bool            `json:"gone,omitempty"`
	Value json.RawMessage `json:"value,omitempty"`
}

type journalKey struct{ kind, id string }

// journal is an append-only file of JSON lines, one record a line. Each record is one write
// to the file, so a process killed at any point leaves whole lines behind (the page cache
// outlives the process); a machine that loses power may leave a torn last line, which
// readJournal skips. It is safe for concurrent use.
type journal struct {
	path string
	log  *slog.Logger

	mu     sync.Mutex
	f      *os.File
	failed bool // a write failed: logged once, the state on disk lags from then on
	// ended are the notifications whose delivery ended (kindNotify records that are
	// gone): a late record of one, written by the change that queued it after its
	// delivery already ended, is dropped rather than bringing it back.
	ended map[string]bool
}

// readJournal replays the journal at path: the last record of each object that is not
// gone. A missing file is an empty journal. An incomplete or unreadable last line (a torn
// write) is skipped with a warning; an unreadable line before it is an error naming the
// file and the line.
func readJournal(path string, log *slog.Logger) (map[journalKey]journalRecord, error) {
	state := map[journalKey]journalRecord{}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return state, nil
	}
	if err != nil {
		return nil, err
	}
	lines := bytes.Split(data, []byte("\n"))
	// The file ends with a newline: the piece after it is empty. A last piece that is not
	// is a line whose write was torn.
	if last := lines[len(lines)-1]; len(bytes.TrimSpace(last)) > 0 {
		log.Warn("sim: the state journal's last line is incomplete (a torn write), skipped", "file", path, "line", len(lines))
	}
	lines = lines[:len(lines)-1]
	for i, text := range lines {
		if len(bytes.TrimSpace(text)) == 0 {
			continue
		}
		var rec journalRecord
		err := json.Unmarshal(text, &rec)
		if err == nil && (rec.Kind == "" || rec.ID == "") {
			err = errors.New("a record needs a kind and an id")
		}
		if err != nil {
			if i == len(lines)-1 {
				log.Warn("sim: the state journal's last line is unreadable (a torn write), skipped", "file", path, "line", i+1)
				break
			}
			return nil, fmt.Errorf("sim: state journal %s, line %d: %v (move the file away to start afresh)", path, i+1, err)
		}
		k := journalKey{rec.Kind, rec.ID}
		if rec.Gone {
			delete(state, k)
		} else {
			state[k] = rec
		}
	}
	return state, nil
}

// writeJournal writes records as a fresh journal at path, atomically: into a temporary file
// beside it, synced, then renamed over it.
func writeJournal(path string, records []journalRecord) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), journalFile+".*.tmp")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // gone after the rename; the leftover of a failure otherwise
	if err := tmp.Chmod(stateFileMode); err != nil {
		tmp.Close()
		return err
	}
	w := bufio.NewWriter(tmp)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	for _, rec := range records {
		if err := enc.Encode(rec); err != nil {
			tmp.Close()
			return err
		}
	}
	if err := w.Flush(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}

// openJournal compacts the journal at path to records and opens it for appending.
func openJournal(path string, records []journalRecord, log *slog.Logger) (*journal, error) {
	slices.SortFunc(records, func(a, b journalRecord) int {
		return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.ID, b.ID))
	})
	if err := writeJournal(path, records); err != nil {
		return nil, fmt.Errorf("sim: compact the state journal: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, stateFileMode)
	if err != nil {
		return nil, err
	}
	return &journal{path: path, log: log, f: f}, nil
}

// put appends the new state of one object (value is marshalled to JSON), or its end when
// value is nil.
func (j *journal) put(kind, id string, value any) {
	rec := journalRecord{Kind: kind, ID: id, Gone: value == nil}
	if value != nil {
		v, err := json.Marshal(value)
		if err != nil {
			j.fail(err)
			return
		}
		rec.Value = v
	}
	line, err := json.Marshal(rec)
	if err != nil {
		j.fail(err)
		return
	}
	line = append(line, '\n')
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.f == nil {
		return
	}
	if kind == kindNotify {
		if j.ended[id] {
			return
		}
		if rec.Gone {
			if j.ended == nil {
				j.ended = map[string]bool{}
			}
			j.ended[id] = true
		}
	}
	if _, err := j.f.Write(line); err != nil {
		j.failLocked(err)
	}
}

func (j *journal) fail(err error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.failLocked(err)
}

func (j *journal) failLocked(err error) {
	if !j.failed {
		j.failed = true
		j.log.Error("sim: cannot write the state journal: what changes from now on is lost at the next restart", "file", j.path, "err", err)
	}
}

// close closes the file; later puts are dropped.
func (j *journal) close() {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.f != nil {
		_ = j.f.Close()
		j.f = nil
	}
}
