package operator_test

import (
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
)

// TestPluginErrorsAreOneLine runs the plugin's binary, as kubectl runs
// it, against servers that fail each way an operator meets (nothing
// listening, a connection closed unanswered, a server that never
// answers, a user without rights, an object or a type that does not
// exist), through the commands that read the cluster: each prints one
// line on stderr, naming what went wrong first, nothing on stdout (no
// client-go log line), and exits 1.
func TestPluginErrorsAreOneLine(t *testing.T) {
	env := controlPlane.Env(t)
	ns := env.CreateNamespace(t, "errors-")
	closed := closedPort(t)
	closing := listen(t, func(c net.Conn) { c.Close() })
	silent := listen(t, func(net.Conn) {}) // holds each connection, says nothing

	for _, tc := range []struct {
		name    string
		flags   []string
		object  string // the command's object, TYPE/NAME
		want    string // the line's start, after "error: "
		contain string
	}{
		{"unreachable: a closed port", []string{"--server", "https://" + closed}, "", "unreachable: nothing listens at https://" + closed + " (connection refused)", ""},
		{"refused: a listener that closes", []string{"--server", "https://" + closing}, "", "refused: the server at https://" + closing + " closed the connection without answering", ""},
		{"timed out: a listener that never answers", []string{"--server", "https://" + silent, "--request-timeout=1s"}, "", "timed out: the server at https://" + silent + " did not answer within 1s (--request-timeout)", ""},
		{"forbidden: a user without rights", []string{"--as", "nobody@example.com"}, "", "forbidden: ", `User "nobody@example.com" cannot get resource`},
		{"not found: no such object", nil, "", "not found: ", `"nosuch" in namespace "` + ns + `"`},
		{"not found: no such type", nil, "nosuchkind/x", `not found: the server has no resource type "nosuchkind"`, ""},
	} {
		for _, command := range [][]string{{"why", "deployment/nosuch"}, {"plan", "sinkbinding/nosuch"}, {"rollout", "status", "sinkbinding/nosuch"}} {
			t.Run(tc.name+"/"+command[0], func(t *testing.T) {
				args := append([]string{}, command...)
				if tc.object != "" {
					args[len(args)-1] = tc.object
				}
				args = append(append(append([]string{"--kubeconfig", env.KubeconfigPath}, args...), "-n", ns), tc.flags...)
				stdout, stderr, code := run(t, env, args...)
				lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
				if code != exitError || stdout != "" || len(lines) != 1 ||
					!strings.HasPrefix(lines[0], "error: "+tc.want) || !strings.Contains(lines[0], tc.contain) {
					t.Errorf("exit %d, stdout %q, stderr:\n%s\nwant exit %d, nothing on stdout, one line starting %q holding %q",
						code, stdout, stderr, exitError, "error: "+tc.want, tc.contain)
				}
			})
		}
	}
}

// closedPort returns a loopback address nothing listens at.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

// listen serves a loopback listener whose connections serve hands, and
// closes it and them at the test's end.
func listen(t *testing.T, serve func(net.Conn)) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if errors.Is(err, net.ErrClosed) {
				return
			}
			if err != nil {
				continue
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			serve(c)
		}
	})
	t.Cleanup(func() {
		l.Close()
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return l.Addr().String()
}
