package hostile_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/bindkit/bindkit/test/fixtures"
)

// testNamespace holds the Bindings and the objects the requests name.
const testNamespace = "hostile"

// memoryBound is what the webhook promises at default options: no request
// or mix of requests grows the process by more than this over its resting
// size.
const memoryBound = 150 << 20

// answer is what the webhook said to one request.
type answer struct {
	status     int
	body       []byte
	retryAfter string
	err        error
}

// suite sends requests to one running controller and measures it.
type suite struct {
	t       *testing.T
	c       *controller
	client  *http.Client
	rest    int64 // VmRSS at rest
	valid   []byte
	uid     atomic.Int64
	results []string
}

func newClient(s *suite, conns int) *http.Client {
	return &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{
		TLSClientConfig:     &tls.Config{RootCAs: s.c.roots},
		MaxIdleConnsPerHost: conns,
	}}
}

// review wraps object in an AdmissionReview of a CREATE of Deployment
// hostile/web, without decoding or copying object more than once.
func (s *suite) review(object []byte) []byte {
	var b bytes.Buffer
	b.Grow(len(object) + 512)
	fmt.Fprintf(&b, `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u-%d",`+
		`"kind":{"group":"apps","version":"v1","kind":"Deployment"},"resource":{"group":"apps","version":"v1","resource":"deployments"},`+
		`"namespace":%q,"name":"web","operation":"CREATE","userInfo":{"username":"hostile"},"object":`, s.uid.Add(1), testNamespace)
	b.Write(object)
	b.WriteString(`}}`)
	return b.Bytes()
}

// post sends body to the webhook with ?timeout=10s, as the kube-apiserver
// does.
func (s *suite) post(client *http.Client, contentType string, body []byte) answer {
	resp, err := client.Post(s.c.url()+"?timeout=10s", contentType, bytes.NewReader(body))
	if err != nil {
		return answer{err: err}
	}
	return answer{status: resp.StatusCode, body: drain(resp.Body), retryAfter: resp.Header.Get("Retry-After")}
}

// check asserts the promises every answer keeps: no 5xx, a message with
// every refusal, a decodable review with every 200, and, for a review that
// refuses, a 4xx code and a message. It returns the review's response for
// a 200. want lists the HTTP statuses the case expects.
func (s *suite) check(what string, a answer, want ...int) *admissionv1.AdmissionResponse {
	s.t.Helper()
	if a.err != nil {
		s.t.Errorf("%s: %v", what, a.err)
		return nil
	}
	if a.status >= 500 {
		s.t.Errorf("%s: %d %s", what, a.status, a.body)
	}
	if len(want) > 0 && !containsInt(want, a.status) {
		s.t.Errorf("%s: status %d (%s), want one of %v", what, a.status, truncate(a.body), want)
	}
	if a.status == http.StatusTooManyRequests && a.retryAfter == "" {
		s.t.Errorf("%s: 429 without Retry-After", what)
	}
	if a.status != http.StatusOK {
		if len(bytes.TrimSpace(a.body)) == 0 {
			s.t.Errorf("%s: %d without a message", what, a.status)
		}
		return nil
	}
	var review admissionv1.AdmissionReview
	if err := json.Unmarshal(a.body, &review); err != nil || review.Response == nil {
		s.t.Errorf("%s: 200 without a review: %v: %s", what, err, truncate(a.body))
		return nil
	}
	r := review.Response
	if !r.Allowed && (r.Result == nil || r.Result.Code < 400 || r.Result.Code >= 500 || r.Result.Message == "") {
		s.t.Errorf("%s: refused without a 4xx and a message: %+v", what, r.Result)
	}
	return r
}

// refusedFor asserts a refusal in a review whose message names bound.
func (s *suite) refusedFor(what string, a answer, code int32, bound string) {
	s.t.Helper()
	r := s.check(what, a, http.StatusOK)
	if r == nil {
		return
	}
	if r.Allowed || r.Result.Code != code || !strings.Contains(r.Result.Message, bound) {
		s.t.Errorf("%s: allowed=%v %+v, want a %d naming %s", what, r.Allowed, r.Result, code, bound)
	}
}

func containsInt(list []int, v int) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

func truncate(b []byte) string {
	if len(b) > 300 {
		return string(b[:300]) + "..."
	}
	return string(b)
}

// scenario runs f and records the process's peak growth over rest while
// it ran, failing t beyond memoryBound.
func (s *suite) scenario(name string, f func()) {
	s.t.Helper()
	if only := os.Getenv("BINDKIT_HOSTILE_SCENARIOS"); only != "" && !regexp.MustCompile(only).MatchString(name) {
		return
	}
	s.c.resetPeak()
	start := time.Now()
	f()
	rss, peak := s.c.memory()
	growth := peak - s.rest
	line := fmt.Sprintf("%-44s peak %4d MiB (+%4d MiB over rest), after %4d MiB, %v", name, peak>>20, growth>>20, rss>>20, time.Since(start).Round(10*time.Millisecond))
	s.results = append(s.results, line)
	s.t.Log(line)
	if growth > memoryBound && os.Getenv("BINDKIT_HOSTILE_MEASURE_ONLY") == "" {
		s.t.Errorf("%s: the process grew %d MiB over rest, more than %d MiB", name, growth>>20, memoryBound>>20)
	}
	if err := s.c.exited(); err != nil {
		s.t.Fatalf("%s: %v", name, err)
	}
}

// parallel runs n copies of f at once.
func parallel(n int, f func(i int)) {
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { f(i) })
	}
	wg.Wait()
}

// listBomb is Deployment hostile/web with n copies of item in a list of
// its pod spec, about size bytes in all when n is 0.
func listBomb(list, item string, size int) []byte {
	var b bytes.Buffer
	b.Grow(size + 256)
	fmt.Fprintf(&b, `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","namespace":%q},"spec":{"template":{"spec":{%q:[`, testNamespace, list)
	for i := 0; b.Len() < size; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(item)
	}
	b.WriteString(`]}}}}`)
	return b.Bytes()
}

// labelBomb is Deployment hostile/web with about size bytes of labels.
func labelBomb(size int) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","namespace":%q,"labels":{`, testNamespace)
	for i := 0; b.Len() < size; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"%x":""`, i)
	}
	b.WriteString(`}},"spec":{"template":{}}}`)
	return b.Bytes()
}

// deepObject is Deployment hostile/web with depth levels of arrays in a
// field nobody reads.
func deepObject(depth int) []byte {
	return []byte(fmt.Sprintf(`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web"},"x":%s%s,"spec":{"template":{}}}`,
		strings.Repeat("[", depth), strings.Repeat("]", depth)))
}

// largeDeployment is the realistic Deployment hostile/web with an
// annotation that makes it size bytes: large, but nothing a bound refuses.
func largeDeployment(t *testing.T, size int) []byte {
	d := fixtures.RealisticDeployment(testNamespace, "web")
	d.Annotations["bulk"] = strings.Repeat("x", size)
	raw, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// rawConn opens a TLS connection to the webhook and writes head to it.
func (s *suite) rawConn(head string) (*tls.Conn, error) {
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", fmt.Sprintf("127.0.0.1:%d", s.c.port), &tls.Config{RootCAs: s.c.roots})
	if err != nil {
		return nil, err
	}
	if _, err := io.WriteString(conn, head); err != nil {
		conn.Close()
		return nil, err
	}
	return conn, nil
}

// statusLine reads the first line of the answer on conn.
func statusLine(conn net.Conn, timeout time.Duration) (string, []byte, error) {
	conn.SetReadDeadline(time.Now().Add(timeout))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return "", nil, err
	}
	return resp.Status, drain(resp.Body), nil
}

// TestHostileInputToRunningWebhook attacks the example controller's
// webhook, running with default flags against the real kube-apiserver,
// with everything its port can be sent, and holds it to its promises: no
// panic, no 5xx (overload is a 429), a message with every refusal, and
// the process's memory within memoryBound of its resting size, read from
// the process itself.
func TestHostileInputToRunningWebhook(t *testing.T) {
	env := controlPlane.Env(t)
	c := startController(t, env, nil)
	createBinding(t, env, "web-binding", "web")
	s := &suite{t: t, c: c}
	s.client = newClient(s, 64)
	valid, err := json.Marshal(fixtures.RealisticDeployment(testNamespace, "web"))
	if err != nil {
		t.Fatal(err)
	}
	s.valid = s.review(valid)
	// The Binding is in the webhook's index once a request is patched.
	if err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		a := s.post(s.client, "application/json", s.review(valid))
		r := s.check("valid request", a, http.StatusOK)
		return r != nil && len(r.Patch) > 0, nil
	}); err != nil {
		t.Fatalf("the webhook never bound Deployment web: %v\n%s", err, c.logTail())
	}
	validOK := func(what string) {
		r := s.check(what, s.post(s.client, "application/json", s.review(valid)), http.StatusOK)
		if r != nil && (!r.Allowed || len(r.Patch) == 0) {
			t.Errorf("%s: valid request allowed=%v with %d bytes of patch, want it bound", what, r.Allowed, len(r.Patch))
		}
	}
	for range 20 {
		validOK("warm-up")
	}
	time.Sleep(time.Second)
	s.rest, _ = c.memory()
	t.Logf("controller pid %d at rest: %d MiB", c.pid(), s.rest>>20)

	s.scenario("malformed bodies", func() {
		for _, tc := range []struct {
			name, contentType, body string
			want                    int
		}{
			{"garbage", "application/json", "\x00\xff not JSON at all", http.StatusBadRequest},
			{"truncated review", "application/json", string(s.valid[:len(s.valid)/2]), http.StatusBadRequest},
			{"array", "application/json", `[1,2,3]`, http.StatusBadRequest},
			{"request of the wrong type", "application/json", `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":5}`, http.StatusBadRequest},
			{"no uid", "application/json", `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"object":{}}}`, http.StatusBadRequest},
			{"keys in the wrong case", "application/json", strings.Replace(string(s.valid), `"request"`, `"REQUEST"`, 1), http.StatusBadRequest},
			{"wrong content type", "text/yaml", string(s.valid), http.StatusUnsupportedMediaType},
			{"empty", "application/json", "", http.StatusBadRequest},
			{"object not JSON", "application/json", string(s.review([]byte(`{"metadata":{"name":"web"},"spec":{"template":{"spec":{"containers":[{]}}}}`))), http.StatusBadRequest},
			{"object with a field twice", "application/json", string(s.review([]byte(`{"metadata":{"name":"web"},"spec":{"template":{}},"spec":{}}`))), http.StatusOK},
			{"template not an object", "application/json", string(s.review([]byte(`{"metadata":{"name":"web"},"spec":{"template":"x"}}`))), http.StatusOK},
		} {
			s.check(tc.name, s.post(s.client, tc.contentType, []byte(tc.body)), tc.want)
		}
		resp, err := s.client.Get(s.c.url())
		if err != nil {
			t.Fatal(err)
		}
		s.check("GET", answer{status: resp.StatusCode, body: drain(resp.Body)}, http.StatusMethodNotAllowed)
		validOK("valid after malformed")
	})

	s.scenario("oversized bodies (8 MiB announced, 8 MiB chunked)", func() {
		conn, err := s.rawConn(fmt.Sprintf("POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", "/githubbindings", 8<<20))
		if err != nil {
			t.Fatal(err)
		}
		status, body, err := statusLine(conn, 10*time.Second)
		conn.Close()
		s.check("8 MiB announced", answer{status: statusCode(status), body: body, err: err}, http.StatusRequestEntityTooLarge)
		// A body of unknown length is cut at the limit.
		big := io.MultiReader(bytes.NewReader(s.valid[:len(s.valid)-2]), bytes.NewReader(bytes.Repeat([]byte(" "), 8<<20)), strings.NewReader("}}"))
		resp, err := s.client.Post(s.c.url(), "application/json", io.NopCloser(big))
		if err == nil {
			s.check("8 MiB chunked", answer{status: resp.StatusCode, body: drain(resp.Body)}, http.StatusRequestEntityTooLarge)
		} else {
			t.Logf("8 MiB chunked: the server closed the connection while the client wrote: %v", err)
		}
		validOK("valid after oversized")
	})

	for _, mib := range []int{1, 3, 6} {
		bomb := s.review(listBomb("containers", "{}", mib<<20))
		s.scenario(fmt.Sprintf("container bomb, %d MiB", mib), func() {
			s.refusedFor(fmt.Sprintf("%d MiB container bomb", mib), s.post(s.client, "application/json", bomb), http.StatusRequestEntityTooLarge, "--webhook-max-containers")
		})
	}
	s.scenario("container bombs, 1 MiB x 32 at once", func() {
		bomb := s.review(listBomb("containers", "{}", 1<<20))
		parallel(32, func(int) {
			a := s.post(s.client, "application/json", bomb)
			if a.status == http.StatusTooManyRequests {
				s.check("concurrent container bomb", a)
				return
			}
			s.refusedFor("concurrent container bomb", a, http.StatusRequestEntityTooLarge, "--webhook-max-containers")
		})
	})
	s.scenario("other bombs, 6 MiB each", func() {
		s.refusedFor("toleration bomb", s.post(s.client, "application/json", s.review(listBomb("tolerations", "{}", 6<<20))),
			http.StatusRequestEntityTooLarge, "--webhook-max-in-flight-memory")
		env := `{"env":[` + strings.Repeat(`{},`, 3999) + `{}]}`
		s.refusedFor("env bomb within the counts", s.post(s.client, "application/json", s.review(listBomb("containers", env, 2<<20))),
			http.StatusRequestEntityTooLarge, "--webhook-max-in-flight-memory")
		s.refusedFor("label bomb", s.post(s.client, "application/json", s.review(labelBomb(6<<20))),
			http.StatusRequestEntityTooLarge, "--webhook-max-in-flight-memory")
		s.refusedFor("nesting 5,000 deep", s.post(s.client, "application/json", s.review(deepObject(5000))),
			http.StatusRequestEntityTooLarge, "--webhook-max-object-depth")
		s.check("nesting 3 million deep", s.post(s.client, "application/json", s.review(deepObject(3<<20))), http.StatusBadRequest)
		var extra bytes.Buffer
		for i := 0; extra.Len() < 6<<20; i++ {
			fmt.Fprintf(&extra, `"%x":[],`, i)
		}
		userBomb := bytes.Replace(s.valid, []byte(`"userInfo":{"username":"hostile"}`),
			[]byte(`"userInfo":{"username":"hostile","extra":{`+extra.String()+`"z":[]}}`), 1)
		s.check("userInfo.extra bomb", s.post(s.client, "application/json", userBomb), http.StatusRequestEntityTooLarge)
		validOK("valid after bombs")
	})

	s.scenario("slow and unfinished bodies, 300 at once", func() {
		var conns []*tls.Conn
		for range 300 {
			conn, err := s.rawConn(fmt.Sprintf("POST /githubbindings?timeout=2s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n{\"apiVersion\":", 1<<20))
			if err != nil {
				t.Fatal(err)
			}
			conns = append(conns, conn)
		}
		// Headers that never end.
		for range 100 {
			conn, err := s.rawConn("POST /githubbindings HTTP/1.1\r\nHost: x\r\nX-Slow: ")
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
		}
		// They hold connections, not the budget or decision slots; beyond
		// one address's share of the connections
		// (--webhook-max-connections-per-peer) the webhook cuts the
		// stalled ones.
		for range 10 {
			validOK("valid beside slow bodies")
		}
		var timedOut, cut atomic.Int32
		parallel(len(conns), func(i int) {
			status, body, err := statusLine(conns[i], 10*time.Second)
			conns[i].Close()
			if err != nil && !isTimeout(err) {
				cut.Add(1)
				return
			}
			timedOut.Add(1)
			s.check("unfinished body", answer{status: statusCode(status), body: body, err: err}, http.StatusRequestTimeout)
		})
		t.Logf("300 unfinished bodies: %d answered 408, %d cut", timedOut.Load(), cut.Load())
	})

	s.scenario("1,200 connections at once (cap 1,000)", func() {
		var (
			mu    sync.Mutex
			conns []net.Conn
		)
		var cut atomic.Int32
		parallel(8, func(int) {
			for range 150 {
				conn, err := s.rawConn("")
				if err != nil {
					// At its cap an address's silent connections are cut,
					// some during their handshake.
					cut.Add(1)
					continue
				}
				mu.Lock()
				conns = append(conns, conn)
				mu.Unlock()
			}
		})
		t.Logf("%d connections opened, %d cut during their handshake", len(conns), cut.Load())
		fresh := newClient(s, 4)
		for range 10 {
			r := s.check("valid beside many idle connections", s.post(fresh, "application/json", s.valid), http.StatusOK)
			if r != nil && len(r.Patch) == 0 {
				t.Error("valid request beside many connections not bound")
			}
		}
		for _, conn := range conns {
			conn.Close()
		}
	})

	s.scenario("large requests, 6 MiB x 32 at once", func() {
		large := s.review(largeDeployment(t, 6<<20))
		var ok, overloaded atomic.Int32
		parallel(32, func(int) {
			a := s.post(s.client, "application/json", large)
			s.check("concurrent large request", a, http.StatusOK, http.StatusTooManyRequests)
			switch a.status {
			case http.StatusOK:
				ok.Add(1)
			case http.StatusTooManyRequests:
				overloaded.Add(1)
			}
		})
		t.Logf("32 large requests: %d answered, %d told to retry", ok.Load(), overloaded.Load())
		if ok.Load() == 0 {
			t.Error("no large request was answered")
		}
	})

	s.scenario("everything at once", func() {
		bomb := s.review(listBomb("containers", "{}", 6<<20))
		large := s.review(largeDeployment(t, 3<<20))
		tolerations := s.review(listBomb("tolerations", "{}", 6<<20))
		parallel(48, func(i int) {
			var a answer
			switch i % 4 {
			case 0:
				a = s.post(s.client, "application/json", bomb)
			case 1:
				a = s.post(s.client, "application/json", large)
			case 2:
				a = s.post(s.client, "application/json", tolerations)
			default:
				a = s.post(s.client, "application/json", s.valid)
			}
			s.check("mixed", a, http.StatusOK, http.StatusTooManyRequests)
		})
		validOK("valid after everything")
	})

	c.checkLog()
	t.Logf("memory of the webhook process (rest %d MiB, bound +%d MiB):\n%s", s.rest>>20, memoryBound>>20, strings.Join(s.results, "\n"))
	auditTestNamespace(t, env)
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

// statusCode reads the code of a status such as "413 Request Entity Too
// Large"; 0 when there is none.
func statusCode(status string) int {
	var code int
	fmt.Sscanf(status, "%d", &code)
	return code
}
