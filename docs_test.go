package orderpay_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// slug is a heading's anchor as Markdown renderers make it: lower case, spaces to hyphens,
// punctuation dropped.
func slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ' || r == '-':
			b.WriteRune('-')
		case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '_':
			b.WriteRune(r)
		}
	}
	return b.String()
}

// Every link of the README and the guides stays inside the repository and resolves: the file
// exists, and an anchor names a heading of it. A document that points outside the repository
// is refused: the project stands alone.
func TestDocsLinksStayInTheRepoAndResolve(t *testing.T) {
	files, _ := filepath.Glob("docs/*.md")
	files = append(files, "README.md", "CHANGELOG.md")
	link := regexp.MustCompile(`\]\(([^)\s]+)\)|src="([^"]+)"`)
	heading := regexp.MustCompile(`(?m)^#{1,6} (.+)$`)
	anchors := map[string]map[string]bool{}
	anchorsOf := func(path string) map[string]bool {
		if a, ok := anchors[path]; ok {
			return a
		}
		a := map[string]bool{}
		if b, err := os.ReadFile(path); err == nil {
			for _, m := range heading.FindAllStringSubmatch(string(b), -1) {
				a[slug(m[1])] = true
			}
		}
		anchors[path] = a
		return a
	}
	checked := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range link.FindAllStringSubmatch(string(b), -1) {
			target := m[1] + m[2]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				t.Errorf("%s links outside the repository: %s", f, target)
				continue
			}
			path, anchor, _ := strings.Cut(target, "#")
			resolved := f
			if path != "" {
				resolved = filepath.Join(filepath.Dir(f), path)
				if _, err := os.Stat(resolved); err != nil {
					t.Errorf("%s links to %s, which is not in the repository", f, target)
					continue
				}
			}
			if anchor != "" && strings.HasSuffix(resolved, ".md") && !anchorsOf(resolved)[anchor] {
				t.Errorf("%s links to %s, but %s has no heading #%s", f, target, resolved, anchor)
			}
			checked++
		}
	}
	if checked < 20 {
		t.Fatalf("only %d links checked", checked)
	}
}

// No document, comment or help text refers to what is not in the repository.
func TestNothingRefersOutsideTheRepo(t *testing.T) {
	banned := regexp.MustCompile(`\.\./shared|seed 00\d|\bissue \d|DESIGN\.md|STYLE\.md|channel-protocols`)
	// Each of banned's alternatives holds one of these.
	bannedLiterals := []string{"../shared", "seed 00", "issue ", "DESIGN.md", "STYLE.md", "channel-protocols"}
	err := filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "testdata", "data", "artifacts", "node_modules":
				return filepath.SkipDir
			}
			return nil
		}
		switch filepath.Ext(path) {
		case ".go", ".md", ".sql", ".js", ".html", ".css", ".sh", ".toml", ".json":
		default:
			if !strings.HasPrefix(path, "scripts/") && path != ".ci/run" {
				return nil
			}
		}
		if path == "docs_test.go" {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		// The regexp only where one of its literals is: a regexp over every line of the
		// repository took most of a minute under the race detector.
		text := string(b)
		if !slices.ContainsFunc(bannedLiterals, func(l string) bool { return strings.Contains(text, l) }) {
			return nil
		}
		for i, line := range strings.Split(text, "\n") {
			if banned.MatchString(line) {
				t.Errorf("%s:%d refers outside the repository: %s", path, i+1, strings.TrimSpace(line))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
