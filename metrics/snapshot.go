package metrics

import (
	"bytes"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
)

// SnapshotEvery is how often the metrics are gathered at most: a scrape within that long of
// the last gather is answered with its page. Prometheus scrapes every 15 s or so; a caller
// that scrapes in a loop, or a hundred at once, costs the server one gather a second and the
// writing of a page, not a gather each (the store's queries, /proc, every collector).
const SnapshotEvery = time.Second

// snapshots serves the text page of a gatherer, gathered at most once per every. One
// gather runs at a time: the scrapes that arrive meanwhile wait for it and share its page.
type snapshots struct {
	g     prometheus.Gatherer
	every time.Duration
	now   func() time.Time

	mu   sync.Mutex
	page []byte
	at   time.Time
}

func (s *snapshots) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	page, err := s.current()
	if err != nil {
		http.Error(w, "gathering the metrics failed: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", string(expfmt.NewFormat(expfmt.TypeTextPlain)))
	w.Write(page)
}

// current is the page of the last gather, or of a new one if that is every old.
func (s *snapshots) current() ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if s.page != nil && now.Sub(s.at) < s.every && !now.Before(s.at) {
		return s.page, nil
	}
	families, err := s.g.Gather()
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	for _, f := range families {
		if _, err := expfmt.MetricFamilyToText(&buf, f); err != nil {
			return nil, err
		}
	}
	s.page, s.at = buf.Bytes(), now
	return s.page, nil
}
