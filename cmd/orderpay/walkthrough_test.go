package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode"
)

// guideStep is one `$ curl …` of a guide and the answer the guide shows for it.
type guideStep struct {
	line    int
	command string
	answer  string
}

// consoleSteps reads a guide's ```console blocks: each `$ ` line is a command (continued
// by a trailing backslash), and the lines up to the next command are its output.
func consoleSteps(t *testing.T, path string) (steps []guideStep, printed []string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	in := false
	var cur *guideStep
	n := 0
	flush := func() {
		if cur != nil {
			cur.answer = strings.TrimSpace(cur.answer)
			steps = append(steps, *cur)
			cur = nil
		}
	}
	for sc.Scan() {
		n++
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "```console"):
			in = true
		case in && strings.HasPrefix(line, "```"):
			flush()
			in = false
		case in && strings.HasPrefix(line, "$ "):
			flush()
			cmd := strings.TrimPrefix(line, "$ ")
			for strings.HasSuffix(cmd, "\\") && sc.Scan() {
				n++
				cmd = strings.TrimSuffix(cmd, "\\") + " " + strings.TrimSpace(sc.Text())
			}
			cur = &guideStep{line: n, command: cmd}
		case in && cur != nil:
			cur.answer += line + "\n"
			if !strings.HasPrefix(cur.command, "curl ") {
				printed = append(printed, line)
			}
		}
	}
	flush()
	return steps, printed
}

// curlRequest turns the guide's curl command into a request: -s, -X METHOD, -H "k: v",
// -d 'body' and one URL, the only forms the guides use.
func curlRequest(cmd string) (*http.Request, error) {
	args, err := shellWords(strings.TrimPrefix(cmd, "curl "))
	if err != nil {
		return nil, err
	}
	method, url, body := "", "", ""
	header := http.Header{}
	for i := 0; i < len(args); i++ {
		switch a := args[i]; a {
		case "-s":
		case "-X", "-H", "-d":
			if i+1 >= len(args) {
				return nil, fmt.Errorf("%s without a value", a)
			}
			i++
			switch a {
			case "-X":
				method = args[i]
			case "-H":
				k, v, _ := strings.Cut(args[i], ":")
				header.Add(strings.TrimSpace(k), strings.TrimSpace(v))
			case "-d":
				body = args[i]
			}
		default:
			if strings.HasPrefix(a, "-") || url != "" {
				return nil, fmt.Errorf("curl argument %q is not one the guides use", a)
			}
			url = a
		}
	}
	if method == "" {
		method = http.MethodGet
		if body != "" {
			method = http.MethodPost
		}
	}
	if !strings.HasPrefix(url, "http") {
		url = "http://" + url
	}
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header = header
	if body != "" && req.Header.Get("Content-Type") == "" {
		req.Header.Set("Content-Type", "application/json")
	}
	return req, nil
}

// shellWords splits a command line as the shell would for the quoting the guides use.
func shellWords(s string) ([]string, error) {
	var out []string
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\'' || c == '"':
			end := strings.IndexByte(s[i+1:], c)
			if end < 0 {
				return nil, fmt.Errorf("unclosed %c in %s", c, s)
			}
			cur.WriteString(s[i+1 : i+1+end])
			i += end + 1
			inWord = true
		case unicode.IsSpace(rune(c)):
			if inWord {
				out = append(out, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		out = append(out, cur.String())
	}
	return out, nil
}

// generated are the fields whose values the server makes up anew on each run (and the
// simulator's Alipay app_id, whose keys are new on each run): the guide's values are names
// for whatever this run's are, and a later command that names one is sent with this run's.
var generated = map[string]bool{"order_no": true, "payment_no": true, "qr_code": true, "code": true, "out_trade_no": true, "trade_no": true,
	"after_sale_no": true, "out_refund_no": true, "shipment_no": true, "app_id": true}

var timeLike = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$`)

// compareAnswer checks that got has the guide's shape: the same fields, recursively, with
// values of the same type; the same values too, except times, countdowns and the values the
// server generates, which it records in names (the guide's value → this run's).
func compareAnswer(path string, want, got any, names map[string]string) []string {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return []string{fmt.Sprintf("%s: an object in the guide, %T here", path, got)}
		}
		var diffs []string
		for k, wv := range w {
			gv, ok := g[k]
			if !ok {
				diffs = append(diffs, fmt.Sprintf("%s.%s: in the guide, missing here", path, k))
				continue
			}
			if s, ok := wv.(string); ok && generated[k] {
				if gs, ok := gv.(string); ok {
					names[s] = gs
					continue
				}
			}
			diffs = append(diffs, compareAnswer(path+"."+k, wv, gv, names)...)
		}
		for k := range g {
			if _, ok := w[k]; !ok {
				diffs = append(diffs, fmt.Sprintf("%s.%s: here, not in the guide", path, k))
			}
		}
		return diffs
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return []string{fmt.Sprintf("%s: %d items in the guide, %v here", path, len(w), got)}
		}
		var diffs []string
		for i := range w {
			diffs = append(diffs, compareAnswer(fmt.Sprintf("%s[%d]", path, i), w[i], g[i], names)...)
		}
		return diffs
	case string:
		g, ok := got.(string)
		switch {
		case !ok:
			return []string{fmt.Sprintf("%s: a string in the guide, %T here", path, got)}
		case timeLike.MatchString(w) && timeLike.MatchString(g), strings.HasSuffix(path, ".remaining"):
			return nil
		case w != g && names[w] != g:
			return []string{fmt.Sprintf("%s: %q in the guide, %q here", path, w, g)}
		}
		return nil
	case float64:
		g, ok := got.(float64)
		switch {
		case !ok:
			return []string{fmt.Sprintf("%s: a number in the guide, %T here", path, got)}
		case strings.HasSuffix(path, "_seconds"):
			return nil // a countdown: it moves
		case w != g:
			return []string{fmt.Sprintf("%s: %v in the guide, %v here", path, w, g)}
		}
		return nil
	default:
		if fmt.Sprint(want) != fmt.Sprint(got) {
			return []string{fmt.Sprintf("%s: %v in the guide, %v here", path, want, got)}
		}
		return nil
	}
}

// The getting-started guide, run: every curl of docs/getting-started.md against a fresh
// server (its addresses and admin token in place of the guide's), each answer compared with
// the guide's field by field. A guide that drifts from the code fails here.
func TestGettingStartedWalkThrough(t *testing.T) {
	t.Parallel()
	steps, printed := consoleSteps(t, "../../docs/getting-started.md")
	names := map[string]string{}
	m, _ := startMain(t, "")
	for _, line := range printed {
		if _, token, ok := strings.Cut(line, "admin token (dev mode, kept in data/admin-token): "); ok {
			names[strings.TrimSpace(token)] = m.AdminToken
		}
	}
	if len(names) != 1 {
		t.Fatal("the guide does not show the admin token serve prints")
	}
	hosts := strings.NewReplacer("localhost:8080", strings.TrimPrefix(m.URL, "http://"), "localhost:8090", strings.TrimPrefix(m.SimURL, "http://"))
	ran := 0
	for _, st := range steps {
		if !strings.HasPrefix(st.command, "curl ") {
			continue
		}
		cmd := hosts.Replace(st.command)
		for guide, here := range names {
			cmd = strings.ReplaceAll(cmd, guide, here)
		}
		var want any
		if err := json.Unmarshal([]byte(st.answer), &want); err != nil {
			t.Fatalf("getting-started.md:%d: the guide's answer is not JSON: %v", st.line, err)
		}
		// A read right after a payment may see the order before the notification is
		// applied: reads are asked again for a few seconds until they agree.
		var diffs []string
		var body []byte
		for deadline := time.Now().Add(10 * time.Second); ; {
			req, err := curlRequest(cmd)
			if err != nil {
				t.Fatalf("getting-started.md:%d: %v", st.line, err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			resp, err := http.DefaultClient.Do(req.WithContext(ctx))
			if err != nil {
				cancel()
				t.Fatalf("getting-started.md:%d: %v", st.line, err)
			}
			body, _ = io.ReadAll(resp.Body)
			resp.Body.Close()
			cancel()
			var got any
			if err := json.Unmarshal(bytes.TrimSpace(body), &got); err != nil {
				t.Fatalf("getting-started.md:%d: the answer is not JSON: %s", st.line, body)
			}
			diffs = compareAnswer("answer", want, got, names)
			if len(diffs) == 0 || req.Method != http.MethodGet || time.Now().After(deadline) {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if len(diffs) > 0 {
			t.Fatalf("getting-started.md:%d: %s\nanswers differently from the guide:\n  %s\nthe answer: %s", st.line, st.command,
				strings.Join(diffs, "\n  "), body)
		}
		ran++
	}
	if ran < 10 {
		t.Fatalf("only %d curl steps ran", ran)
	}
	t.Logf("%d steps of the guide ran and answered as it shows", ran)
}
