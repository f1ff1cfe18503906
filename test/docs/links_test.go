package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// maxReadmeLines keeps the front page a front page: what bindkit is, the
// two commands, a Binding, and where to go next; the rest is in docs/.
const maxReadmeLines = 250

// TestReadmeIsShort fails when README.md outgrows a front page.
func TestReadmeIsShort(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(data), "\n"); n > maxReadmeLines {
		t.Errorf("README.md has %d lines, more than %d: move the detail into a page of docs/ and link it", n, maxReadmeLines)
	}
}

// markdownLink matches [text](target) and the target's anchor; images and
// external links are filtered by the caller.
var markdownLink = regexp.MustCompile(`\[[^\]]*\]\(([^)\s]+)\)`)

// link is one link of a document: the file it points at (relative to the
// repository root) and the anchor within it, if any.
type link struct {
	from, file, anchor string
}

// linksOf returns the internal links of the Markdown file doc (relative to
// root), outside code blocks.
func linksOf(t *testing.T, doc string) []link {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, doc))
	if err != nil {
		t.Fatal(err)
	}
	var out []link
	for _, m := range markdownLink.FindAllStringSubmatch(withoutCode(string(data)), -1) {
		target := m[1]
		if regexp.MustCompile(`^[a-z]+:`).MatchString(target) {
			continue // http:, https:, mailto:
		}
		file, anchor, _ := strings.Cut(target, "#")
		if file == "" {
			file = doc
		} else {
			file = filepath.ToSlash(filepath.Join(filepath.Dir(doc), file))
		}
		out = append(out, link{from: doc, file: file, anchor: anchor})
	}
	return out
}

// withoutCode drops fenced code blocks and inline code, where brackets and
// parentheses are code, not links.
func withoutCode(s string) string {
	s = regexp.MustCompile("(?s)```.*?```").ReplaceAllString(s, "")
	return regexp.MustCompile("`[^`\n]*`").ReplaceAllString(s, "")
}

// anchors returns the heading anchors of a Markdown file as GitHub makes
// them: lower case, punctuation dropped, spaces as hyphens, repeats
// numbered.
func anchors(t *testing.T, doc string) map[string]bool {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, doc))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	seen := map[string]int{}
	for _, line := range strings.Split(regexp.MustCompile("(?s)```.*?```").ReplaceAllString(string(data), ""), "\n") {
		if !strings.HasPrefix(line, "#") {
			continue
		}
		a := slug(strings.TrimLeft(line, "# "))
		if n := seen[a]; n > 0 {
			out[a+"-"+strconv.Itoa(n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}

func slug(heading string) string {
	heading = strings.ToLower(strings.TrimSpace(heading))
	var b strings.Builder
	for _, r := range heading {
		switch {
		case r == ' ' || r == '-':
			b.WriteRune('-')
		case r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// TestDocsLinks: no internal link of README.md, the repository's other
// documents or docs/ is broken (the file exists, and so does the heading
// an anchor names), and every page of docs/ is reached from README.md,
// directly or through pages it links.
func TestDocsLinks(t *testing.T) {
	docs := documents(t)
	reached := map[string]bool{"README.md": true}
	queue := []string{"README.md"}
	var all []link
	for _, d := range docs {
		all = append(all, linksOf(t, d)...)
	}
	for _, l := range all {
		info, err := os.Stat(filepath.Join(root, l.file))
		if err != nil {
			t.Errorf("%s: link to %s: no such file", l.from, l.file)
			continue
		}
		if l.anchor != "" && !info.IsDir() && strings.HasSuffix(l.file, ".md") && !anchors(t, l.file)[l.anchor] {
			t.Errorf("%s: link to %s#%s: no such heading", l.from, l.file, l.anchor)
		}
	}
	for len(queue) > 0 {
		d := queue[0]
		queue = queue[1:]
		for _, l := range linksOf(t, d) {
			if strings.HasSuffix(l.file, ".md") && !reached[l.file] && slices.Contains(docs, l.file) {
				reached[l.file] = true
				queue = append(queue, l.file)
			}
		}
	}
	for _, d := range docs {
		if strings.HasPrefix(d, "docs/") && !reached[d] {
			t.Errorf("%s is not reached from README.md: link it from README.md or a page README.md leads to", d)
		}
	}
}
