package main

import (
	"bytes"
	"fmt"
	"go/format"
	"os"
	"path/filepath"
	"strings"
)

// edits are changes to a kubebuilder project's files, made in memory and
// written together once every one succeeded, so that a project is left as
// it was when one fails.
type edits struct {
	dir   string
	files map[string][]byte // by path relative to dir
	order []string          // paths, in the order first touched
	// created are the paths that did not exist.
	created map[string]bool
	// warnings are what could not be done and the user must do by hand.
	warnings []string
}

func newEdits(dir string) *edits {
	return &edits{dir: dir, files: map[string][]byte{}, created: map[string]bool{}}
}

// read returns the content of rel, as edited so far; ok is false when it
// does not exist.
func (e *edits) read(rel string) (content []byte, ok bool, err error) {
	if c, ok := e.files[rel]; ok {
		return c, true, nil
	}
	c, err := os.ReadFile(filepath.Join(e.dir, rel))
	if os.IsNotExist(err) {
		return nil, false, nil
	}
	return c, err == nil, err
}

// set records rel's new content.
func (e *edits) set(rel string, content []byte) {
	if _, ok := e.files[rel]; !ok {
		e.order = append(e.order, rel)
	}
	e.files[rel] = content
}

// create records a new file rel; it is an error when rel exists.
func (e *edits) create(rel string, content []byte) error {
	if _, ok, err := e.read(rel); err != nil {
		return err
	} else if ok {
		return fmt.Errorf("%s exists: bindkit kubebuilder create binding writes it, and overwrites nothing", rel)
	}
	e.created[rel] = true
	e.set(rel, content)
	return nil
}

// createIfMissing records rel with content unless it exists, and reports
// whether it did.
func (e *edits) createIfMissing(rel string, content []byte) (bool, error) {
	if _, ok, err := e.read(rel); err != nil || ok {
		return false, err
	}
	e.created[rel] = true
	e.set(rel, content)
	return true, nil
}

// edit applies f to rel's content; a missing file is an error.
func (e *edits) edit(rel string, f func(string) (string, error)) error {
	c, ok, err := e.read(rel)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%s: no such file (kubebuilder init writes it)", rel)
	}
	out, err := f(string(c))
	if err != nil {
		return fmt.Errorf("%s: %w", rel, err)
	}
	e.set(rel, []byte(out))
	return nil
}

// warn records what the user must do by hand.
func (e *edits) warn(format string, args ...any) {
	e.warnings = append(e.warnings, fmt.Sprintf(format, args...))
}

// write writes every recorded file, gofmt-ing Go files, and returns the
// paths written, created first.
func (e *edits) write() ([]string, error) {
	for _, rel := range e.order {
		content := e.files[rel]
		if strings.HasSuffix(rel, ".go") {
			formatted, err := format.Source(content)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", rel, err)
			}
			content = formatted
		}
		path := filepath.Join(e.dir, rel)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(path, content, 0o644); err != nil {
			return nil, err
		}
	}
	return e.order, nil
}

// insertBeforeMarker inserts text (whole lines) before the line holding
// marker (a kubebuilder scaffold marker such as
// "+kubebuilder:scaffold:imports"), at that line's indentation, unless
// the content holds text's first line already (kubebuilder wrote the same
// registration for another kind of the group-version). It is an error
// when the marker is missing.
func insertBeforeMarker(content, marker, text string) (string, error) {
	first, _, _ := strings.Cut(strings.TrimSpace(text), "\n")
	if strings.Contains(content, first) {
		return content, nil
	}
	i := strings.Index(content, marker)
	if i < 0 {
		return "", fmt.Errorf("no %q marker to add after", marker)
	}
	start := strings.LastIndex(content[:i], "\n") + 1
	indent := content[start : start+len(content[start:i])-len(strings.TrimLeft(content[start:i], " \t"))]
	var b strings.Builder
	for _, line := range strings.Split(strings.TrimRight(text, "\n"), "\n") {
		if line != "" {
			b.WriteString(indent)
		}
		b.WriteString(line)
		b.WriteString("\n")
	}
	return content[:start] + b.String() + content[start:], nil
}

// uncomment removes one leading "#" from every line of block where
// content holds it, as kubebuilder's own plugins enable a commented
// section of its kustomizations; done reports whether block or its
// uncommented form is there.
func uncomment(content, block string) (out string, done bool) {
	var plain []string
	for _, line := range strings.Split(block, "\n") {
		plain = append(plain, strings.TrimPrefix(line, "#"))
	}
	if strings.Contains(content, block) {
		return strings.Replace(content, block, strings.Join(plain, "\n"), 1), true
	}
	return content, strings.Contains(content, strings.Join(plain, "\n"))
}

// insertAfterLine inserts text after the first line equal to line
// (trailing spaces aside), unless content holds text already; ok is false
// when no such line exists.
func insertAfterLine(content, line, text string) (out string, ok bool) {
	if strings.Contains(content, strings.TrimRight(text, "\n")) {
		return content, true
	}
	lines := strings.SplitAfter(content, "\n")
	for i, l := range lines {
		if strings.TrimRight(l, " \t\r\n") == line {
			if !strings.HasSuffix(l, "\n") {
				lines[i] += "\n"
			}
			rest := strings.Join(lines[i+1:], "")
			return strings.Join(lines[:i+1], "") + strings.TrimRight(text, "\n") + "\n" + rest, true
		}
	}
	return content, false
}

// hasLine reports whether content has a line equal to line (trailing
// spaces aside).
func hasLine(content, line string) bool {
	for _, l := range strings.Split(content, "\n") {
		if strings.TrimRight(l, " \t\r") == line {
			return true
		}
	}
	return false
}

// ensureTrailingNewline returns b ending in exactly one newline.
func ensureTrailingNewline(b []byte) []byte {
	return append(bytes.TrimRight(b, "\n"), '\n')
}
