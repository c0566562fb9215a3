package chaos

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
)

// progressState is one redraw of the progress line.
type progressState struct {
	Label     string // the strategy, under Compare
	Phase     string // setup, load, settle, audit
	Done      int64  // buyers whose script is over
	Total     int
	Paid      int64 // orders PAID in the database
	Errors    int64 // API errors
	Crashes   int
	CrashesOf int
	Elapsed   time.Duration
}

// progressBarWidth is the width of the bar in characters.
const progressBarWidth = 24

// formatProgress renders s as one line:
//
//	[##########..............]  812/2000 buyers  paid 530  errors 41  crashes 2/5  12.3s  load
func formatProgress(s progressState) string {
	filled := 0
	if s.Total > 0 {
		filled = int(int64(progressBarWidth) * min(s.Done, int64(s.Total)) / int64(s.Total))
	}
	var b strings.Builder
	if s.Label != "" {
		b.WriteString(s.Label + " ")
	}
	fmt.Fprintf(&b, "[%s%s] %*d/%d buyers  paid %d  errors %d  crashes %d/%d  %.1fs  %s",
		strings.Repeat("#", filled), strings.Repeat(".", progressBarWidth-filled),
		len(fmt.Sprint(s.Total)), s.Done, s.Total, s.Paid, s.Errors, s.Crashes, s.CrashesOf, s.Elapsed.Seconds(), s.Phase)
	return b.String()
}

// progress redraws the progress line on a terminal (every 200 ms, in place), or prints it
// as a new line every 2 s on anything else (a CI log), until stopped.
type progress struct {
	w     io.Writer
	tty   bool
	read  func() progressState
	stop  chan struct{}
	done  chan struct{}
	once  sync.Once
	width int
}

func startProgress(w io.Writer, read func() progressState) *progress {
	p := &progress{w: w, read: read, stop: make(chan struct{}), done: make(chan struct{})}
	if f, ok := w.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			p.tty = true
		}
	}
	if w == io.Discard {
		close(p.done)
		return p
	}
	every := 2 * time.Second
	if p.tty {
		every = 200 * time.Millisecond
	}
	go func() {
		defer close(p.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-p.stop:
				p.draw(true)
				return
			case <-t.C:
				p.draw(false)
			}
		}
	}()
	return p
}

func (p *progress) draw(last bool) {
	line := formatProgress(p.read())
	if !p.tty {
		fmt.Fprintln(p.w, line)
		return
	}
	pad := max(p.width-len(line), 0)
	p.width = len(line)
	fmt.Fprintf(p.w, "\r%s%s", line, strings.Repeat(" ", pad))
	if last {
		fmt.Fprintln(p.w)
	}
}

// Stop draws the final line and stops.
func (p *progress) Stop() {
	p.once.Do(func() {
		select {
		case <-p.done:
		default:
			close(p.stop)
			<-p.done
		}
	})
}
