// Package apiproxy puts a proxy between one process and the
// kube-apiserver, for fault tests: it forwards every request (watches
// streamed), and rules can delay a request, refuse it, or act (kill the
// process) before it is forwarded or once its answer came back. It is a
// test rig, not API.
package apiproxy

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Request is what a rule sees of a request: its method, path, query and
// body (read whole: the rig's processes send small bodies).
type Request struct {
	Method, Path, Query string
	Body                []byte
}

// Is reports whether r is a method request on a path containing each of
// parts, in order.
func (r Request) Is(method string, parts ...string) bool {
	if r.Method != method {
		return false
	}
	at := 0
	for _, p := range parts {
		i := strings.Index(r.Path[at:], p)
		if i < 0 {
			return false
		}
		at += i + len(p)
	}
	return true
}

// Rule acts on the requests Match selects. Before runs before the request
// is forwarded, After once its answer came back (with the status code);
// a Refuse status answers the request without forwarding it; Delay holds
// it first.
type Rule struct {
	Match  func(Request) bool
	Delay  time.Duration
	Refuse int
	Before func(Request)
	After  func(Request, int)
}

// Proxy forwards to one kube-apiserver.
type Proxy struct {
	// Kubeconfig reaches the kube-apiserver through the proxy, with no
	// credentials of its own: the proxy adds the environment's.
	Kubeconfig string

	mu    sync.Mutex
	rules []*Rule
	srv   *http.Server
}

// Start starts a proxy to the kube-apiserver of cfg on 127.0.0.1 (a port
// the kernel picks) and writes its kubeconfig into dir; it stops at t's
// cleanup.
func Start(t testing.TB, cfg *rest.Config, dir string) *Proxy {
	t.Helper()
	target, err := url.Parse(cfg.Host)
	if err != nil {
		t.Fatal(err)
	}
	transport, err := rest.TransportFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{}
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.Transport = transport
	rp.FlushInterval = -1 // watches stream
	p.srv = &http.Server{Handler: p.handler(rp), ReadHeaderTimeout: 10 * time.Second}
	go p.srv.Serve(lis)
	t.Cleanup(func() { p.srv.Close() })
	p.Kubeconfig = filepath.Join(dir, fmt.Sprintf("proxy-%d.kubeconfig", lis.Addr().(*net.TCPAddr).Port))
	kc := clientcmdapi.NewConfig()
	kc.Clusters["proxy"] = &clientcmdapi.Cluster{Server: "http://" + lis.Addr().String()}
	kc.AuthInfos["proxy"] = &clientcmdapi.AuthInfo{}
	kc.Contexts["proxy"] = &clientcmdapi.Context{Cluster: "proxy", AuthInfo: "proxy"}
	kc.CurrentContext = "proxy"
	if err := clientcmd.WriteToFile(*kc, p.Kubeconfig); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(p.Kubeconfig) })
	return p
}

// Add adds r and returns a function that removes it.
func (p *Proxy) Add(r *Rule) (remove func()) {
	p.mu.Lock()
	p.rules = append(p.rules, r)
	p.mu.Unlock()
	return func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		for i, x := range p.rules {
			if x == r {
				p.rules = append(p.rules[:i], p.rules[i+1:]...)
				return
			}
		}
	}
}

func (p *Proxy) matching(req Request) []*Rule {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []*Rule
	for _, r := range p.rules {
		if r.Match == nil || r.Match(req) {
			out = append(out, r)
		}
	}
	return out
}

func (p *Proxy) handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		req := Request{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Body: body}
		rules := p.matching(req)
		for _, rule := range rules {
			if rule.Delay > 0 {
				time.Sleep(rule.Delay)
			}
			if rule.Before != nil {
				rule.Before(req)
			}
			if rule.Refuse != 0 {
				http.Error(w, "refused by the test's proxy", rule.Refuse)
				return
			}
		}
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(rec, r)
		for _, rule := range rules {
			if rule.After != nil {
				rule.After(req, rec.status)
			}
		}
	})
}

// statusRecorder remembers the status written, and flushes for watches.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	s.status = code
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}
