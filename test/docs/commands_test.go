package docs

import (
	"bufio"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// block is a command block of a document.
type block struct {
	source string // file:line of its first command
	lines  []string
}

// documents are the repository's documents whose ```sh blocks are checked,
// the pages of docs/ among them; every doc.go's indented command lines are
// too.
func documents(t testing.TB) []string {
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	out := []string{"README.md", "CONTRIBUTING.md", "MIGRATING.md", "ARCHITECTURE.md"}
	for _, p := range pages {
		rel, err := filepath.Rel(root, p)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, filepath.ToSlash(rel))
	}
	return out
}

// TestCommandBlocks runs, as written, every command block of the
// documents and of the package docs that can run here, each block in a
// session of its own: `cd path/to/bindkit` enters a copy of this
// checkout, a module scaffolded there is built and tested (with no
// control plane, then with the binaries of BINDKIT_BIN_DIR adopted as
// `go tool bindkit controlplane` adopts $KUBEBUILDER_ASSETS, when it is
// set), make targets run with -n. What cannot run here is checked as far
// as it can be: kubectl's files and the objects it names exist in config/;
// bindkit@latest waits for bindkit to be published; go install of a
// module not in the module cache needs the proxy. A command the test does
// not know fails it, so a new command gets checked.
func TestCommandBlocks(t *testing.T) {
	if testing.Short() {
		t.Skip("scaffolds and tests a module: minutes")
	}
	for _, b := range commandBlocks(t) {
		t.Run(b.source, func(t *testing.T) {
			s := &session{t: t, cwd: root}
			for _, line := range b.lines {
				if s.stopped {
					t.Logf("not run: %s", line)
					continue
				}
				s.run(line)
			}
		})
	}
}

// commandBlocks returns the ```sh blocks of the documents and the
// indented command lines of every doc.go.
func commandBlocks(t *testing.T) []block {
	t.Helper()
	var out []block
	fence := regexp.MustCompile("(?s)```(?:sh|bash|shell)\n(.*?)```")
	for _, doc := range documents(t) {
		data, err := os.ReadFile(filepath.Join(root, doc))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range fence.FindAllSubmatchIndex(data, -1) {
			line := 1 + strings.Count(string(data[:m[2]]), "\n")
			out = append(out, block{source: doc + ":" + strconv.Itoa(line), lines: commandLines(string(data[m[2]:m[3]]))})
		}
	}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() && (d.Name() == ".git" || d.Name() == "bin" || d.Name() == "testdata") {
			if err == nil {
				return filepath.SkipDir
			}
			return err
		}
		if d.Name() == "doc.go" {
			out = append(out, docBlocks(t, path)...)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// goCommand matches a line that runs the go command (not a Go statement
// like `go impl.Run(ctx, 2)`).
var goCommand = regexp.MustCompile(`^(\S+=\S+ )*go (build|install|run|test|vet|tool|get|mod|generate|list|env)\b`)

// docBlocks returns a doc.go's runs of indented comment lines (//\t...)
// whose first line is a command.
func docBlocks(t *testing.T, path string) []block {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rel, _ := filepath.Rel(root, path)
	var out []block
	var cur *block
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		text, ok := strings.CutPrefix(sc.Text(), "//\t")
		switch {
		case !ok:
			cur = nil
		case cur != nil:
			cur.lines = append(cur.lines, commandLines(text)...)
		case goCommand.MatchString(text) || strings.HasPrefix(text, "make ") || strings.HasPrefix(text, "kubectl "):
			out = append(out, block{source: rel + ":" + strconv.Itoa(n), lines: commandLines(text)})
			cur = &out[len(out)-1]
		}
	}
	return out
}

// commandLines returns the commands of a block, comments and blank lines
// dropped, continued lines joined.
func commandLines(text string) []string {
	var out []string
	text = strings.ReplaceAll(text, "\\\n", " ")
	lines := strings.Split(text, "\n")
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		// A here-document: its body, up to the delimiter, is the
		// command's, after a newline.
		if m := hereDoc.FindStringSubmatch(line); m != nil {
			body := []string{strings.TrimSpace(line)}
			for i++; i < len(lines) && strings.TrimSpace(lines[i]) != m[1]; i++ {
				body = append(body, lines[i])
			}
			out = append(out, strings.Join(body, "\n"))
			continue
		}
		// A single-quoted argument spanning lines is one argument.
		for strings.Count(line, "'")%2 == 1 && i+1 < len(lines) {
			i++
			line += " " + lines[i]
		}
		if i := strings.Index(line, " #"); i >= 0 && strings.Count(line[:i], "'")%2 == 0 {
			line = line[:i]
		}
		if line = strings.Join(strings.Fields(line), " "); line != "" && !strings.HasPrefix(line, "#") {
			out = append(out, line)
		}
	}
	return out
}

// hereDoc matches a command line that opens a here-document, and its
// delimiter.
var hereDoc = regexp.MustCompile(`<<-?'?([A-Z]+)'?\s*$`)

// session runs one block's commands in order, in a working directory the
// commands change.
type session struct {
	t       *testing.T
	cwd     string
	env     []string // the environment's additions, made on first use
	stopped bool     // the rest of the block cannot run here
}

func (s *session) run(line string) {
	t := s.t
	t.Helper()
	fields := strings.Fields(line)
	switch {
	case line == "cd path/to/bindkit":
		s.cwd = s.checkoutCopy()
	case fields[0] == "cd":
		s.cwd = filepath.Join(s.cwd, fields[1])
		if _, err := os.Stat(s.cwd); err != nil {
			t.Fatalf("%s: %v", line, err)
		}
	case fields[0] == "make":
		s.exec(root, nil, append([]string{"make", "-n"}, fields[1:]...)...)
	case fields[0] == "kubectl" && strings.Contains(line, "\n"):
		checkHereDoc(t, line)
	case fields[0] == "kubectl":
		checkKubectl(t, fields)
	case shellVariable.MatchString(line), fields[0] == "sleep", fields[0] == "kill" && strings.HasPrefix(fields[1], "%"):
		t.Logf("the shell's own (a variable, a wait, a background job): %s", line)
	case fields[0] == "curl":
		checkCurl(t, line)
	case strings.HasPrefix(line, "(cd config && kustomize edit set image "):
		image, _, _ := strings.Cut(strings.TrimSuffix(fields[len(fields)-1], ")"), "=")
		if !configHolds(t, "image: "+image) {
			t.Errorf("%s: config/ has no image %s", line, image)
		}
	case strings.HasPrefix(line, "go run github.com/bindkit/bindkit/cmd/bindkit@"):
		t.Logf("not run until bindkit is on the module proxy: %s", line)
		s.stopped = true
	case strings.HasPrefix(line, "go tool bindkit controlplane"):
		s.controlPlane(fields[4:])
	case strings.HasPrefix(line, "GOBIN=DIR go install "):
		s.goInstall(fields)
	case strings.HasPrefix(line, "go run ./hack/controlplane") && s.cwd == root:
		s.attachLoop(fields[3:])
	case fields[0] == "export" && (strings.HasPrefix(fields[1], "BINDKIT_CONTROL_PLANE=") || strings.HasPrefix(fields[1], "BINDKIT_KUBE_MINOR=")):
		t.Logf("not run (the line hack/controlplane prints, for another shell): %s", line)
	case fields[0] == "go" && s.cwd == root && (fields[1] == "test" || fields[1] == "vet"):
		s.exec(root, nil, append([]string{"go", fields[1], "-n"}, fields[2:]...)...)
	case fields[0] == "go":
		s.exec(s.cwd, s.environment(), fields...)
	default:
		t.Errorf("test/docs does not know how to check %q: add a case to session.run", line)
	}
}

// checkoutCopy copies this checkout's files (tracked, and new ones not
// ignored) into a temporary directory, as "path/to/bindkit".
func (s *session) checkoutCopy() string {
	t := s.t
	out, err := exec.Command("git", "-C", root, "ls-files", "-co", "--exclude-standard").Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	dst := filepath.Join(t.TempDir(), "bindkit")
	for _, rel := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		src := filepath.Join(root, rel)
		info, err := os.Stat(src)
		if err != nil || !info.Mode().IsRegular() {
			continue // deleted in the working tree
		}
		if err := copyFile(src, filepath.Join(dst, rel), info.Mode()); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

func copyFile(src, dst string, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// environment is where the session's commands run: no control plane of
// the machine's (an empty user cache and setup-envtest store, no
// KUBEBUILDER_ASSETS or BINDKIT_BIN_DIR, not CI), the go command's caches
// kept.
func (s *session) environment() []string {
	if s.env != nil {
		return s.env
	}
	for _, v := range []string{"GOCACHE", "GOMODCACHE", "GOPATH"} {
		out, err := exec.Command("go", "env", v).Output()
		if err != nil {
			s.t.Fatal(err)
		}
		s.env = append(s.env, v+"="+strings.TrimSpace(string(out)))
	}
	// GOBIN: a page's go install lands in the session's own directory.
	s.env = append(s.env, "XDG_CACHE_HOME="+s.t.TempDir(), "XDG_DATA_HOME="+s.t.TempDir(), "GOBIN="+s.t.TempDir(),
		"KUBEBUILDER_ASSETS=", "BINDKIT_BIN_DIR=", "CI=", "GOWORK=off", "GOFLAGS=-mod=readonly")
	return s.env
}

// controlPlane runs `go tool bindkit controlplane` as an author would
// with controller-runtime's binaries in $KUBEBUILDER_ASSETS: those of
// BINDKIT_BIN_DIR, which it must adopt without building. Without them it
// only checks that the command parses its flags: it would build for
// minutes.
func (s *session) controlPlane(args []string) {
	command := []string{"go", "tool", "bindkit", "controlplane"}
	if s.cwd == root { // bindkit's own module, where the command is go run ./cmd/bindkit
		command = []string{"go", "run", "./cmd/bindkit", "controlplane"}
	}
	bins := os.Getenv("BINDKIT_BIN_DIR")
	if _, err := os.Stat(filepath.Join(bins, "kube-apiserver")); bins == "" || err != nil {
		out := s.exec(s.cwd, s.environment(), append(append(command, "-h"), args...)...)
		if !strings.Contains(out, "usage: bindkit controlplane") {
			s.t.Errorf("go tool bindkit controlplane -h: no usage:\n%s", out)
		}
		s.t.Logf("not run (it would build the control plane; set BINDKIT_BIN_DIR to adopt those binaries): go tool bindkit controlplane %s", strings.Join(args, " "))
		return
	}
	env := append(s.environment(), "KUBEBUILDER_ASSETS="+bins)
	if slices.Contains(args, "-run") {
		s.runUntilReady(env, append(command, args...))
		return
	}
	out := s.exec(s.cwd, env, append(command, args...)...)
	if !strings.Contains(out, "nothing to build") {
		s.t.Errorf("go tool bindkit controlplane with KUBEBUILDER_ASSETS=%s builds:\n%s", bins, out)
	}
}

// attachLoop checks `go run ./hack/controlplane` (which runs until
// interrupted, so is not run here) as far as it can: it builds, and
// parses the flags the line gives.
func (s *session) attachLoop(args []string) {
	out := s.exec(root, nil, append(append([]string{"go", "run", "./hack/controlplane"}, args...), "-h")...)
	if !strings.Contains(out, "-workloads") {
		s.t.Errorf("go run ./hack/controlplane -h: no usage:\n%s", out)
	}
	s.t.Logf("not run (it runs until interrupted): go run ./hack/controlplane %s", strings.Join(args, " "))
}

// goInstall checks a `GOBIN=DIR go install module@version` line with -n,
// from the module cache only, with no network at all: GOPROXY=off alone
// would still ask sum.golang.org for the module's checksum, which a machine
// with no route to it (this one, at times) cannot reach; the module cache
// verified it when it was downloaded.
func (s *session) goInstall(fields []string) {
	args := append([]string{"go", "install", "-n"}, fields[3:]...)
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Dir = s.t.TempDir()
	cmd.Env = append(os.Environ(), "GOBIN="+s.t.TempDir(), "GOPROXY=off", "GOSUMDB=off", "GOFLAGS=-mod=mod", "GOWORK=off")
	out, err := cmd.CombinedOutput()
	switch {
	case err != nil && strings.Contains(string(out), "module lookup disabled"):
		s.t.Logf("not checked (its modules are not in the module cache, and the test does not use the proxy): %s", strings.Join(fields, " "))
	case err != nil:
		s.t.Errorf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// exec runs a command and fails the test when it fails.
func (s *session) exec(dir string, env []string, args ...string) string {
	s.t.Helper()
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if help := len(args) > 4 && args[4] == "-h"; err != nil && !help { // -h exits non-zero by design
		s.t.Fatalf("%s (in %s): %v\n%s", strings.Join(args, " "), dir, err, out)
	}
	return string(out)
}

// checkKubectl checks what a kubectl line names: its -f and -k paths exist
// (relative to the repository), and the objects it names are in config/.
func checkKubectl(t *testing.T, fields []string) {
	t.Helper()
	for i, f := range fields {
		switch {
		case (f == "-f" || f == "-k") && i+1 < len(fields):
			if _, err := os.Stat(filepath.Join(root, fields[i+1])); err != nil {
				t.Errorf("%s: %v", strings.Join(fields, " "), err)
			}
		case strings.HasPrefix(f, "job/") || (i > 0 && fields[i-1] == "deployment"):
			name := f[strings.Index(f, "/")+1:]
			if !configHolds(t, "name: "+name) {
				t.Errorf("%s: config/ has no object named %s", strings.Join(fields, " "), name)
			}
		}
	}
}

// shellVariable matches a line that only sets a shell variable.
var shellVariable = regexp.MustCompile(`^[A-Z_][A-Z0-9_]*=\S+$`)

// checkHereDoc checks a kubectl command whose objects come from a
// here-document: they must be Kubernetes objects (apiVersion, kind, name).
func checkHereDoc(t *testing.T, line string) {
	t.Helper()
	command, body, _ := strings.Cut(line, "\n")
	if !strings.Contains(command, "-f -") {
		t.Errorf("%s: a here-document is read only with -f -", command)
		return
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(body), 4096)
	for n := 0; ; n++ {
		var obj map[string]any
		if err := dec.Decode(&obj); errors.Is(err, io.EOF) {
			if n == 0 {
				t.Errorf("%s: the here-document holds no object", command)
			}
			return
		} else if err != nil {
			t.Errorf("%s: %v", command, err)
			return
		}
		meta, _ := obj["metadata"].(map[string]any)
		if obj["apiVersion"] == nil || obj["kind"] == nil || meta["name"] == nil {
			t.Errorf("%s: object %d lacks apiVersion, kind or metadata.name: %v", command, n, obj)
		}
	}
}

// checkCurl checks a curl of the controller's metrics endpoint (a
// port-forward of a cluster's controller, which cannot run here): it asks
// for /metrics over HTTPS, as the endpoint serves it. What it answers,
// 401, 403 or the metrics, is injection/sharedmain's
// TestMetricsAuthWithRealAPIServer's to check.
func checkCurl(t *testing.T, line string) {
	t.Helper()
	if !strings.Contains(line, "https://localhost:") || !strings.Contains(line, "/metrics") {
		t.Errorf("%s: test/docs checks only curls of https://localhost:PORT/metrics", line)
		return
	}
	t.Logf("not run (a cluster's controller, through a port-forward): %s", line)
}

// configHolds reports whether a YAML file under config/ holds text.
func configHolds(t *testing.T, text string) bool {
	t.Helper()
	found := false
	err := filepath.WalkDir(filepath.Join(root, "config"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".yaml") {
			return err
		}
		data, err := os.ReadFile(path)
		if err == nil && strings.Contains(string(data), text) {
			found = true
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}

// TestCommandLines: continued lines are joined, a here-document stays
// with its command, a quoted argument spanning lines is one, comments go.
func TestCommandLines(t *testing.T) {
	text := "kubectl apply -f - <<'EOF'\nkind: X\nEOF\nkubectl patch d x -p='[\n  {\"op\": \"add\"}\n]'\ngo test \\\n  ./...   # all\n# a comment\n"
	want := []string{"kubectl apply -f - <<'EOF'\nkind: X", "kubectl patch d x -p='[ {\"op\": \"add\"} ]'", "go test ./..."}
	if diff := cmp.Diff(want, commandLines(text)); diff != "" {
		t.Errorf("commandLines (-want +got):\n%s", diff)
	}
}
