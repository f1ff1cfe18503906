package upgrade

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/bindkit/bindkit/test/demo"
	"github.com/bindkit/bindkit/test/testenv"
)

// release is the release before this one: its controller writes the
// records this tree must read without a write, and reads the records this
// tree writes (docs/upgrading.md, CHANGELOG.md: v0.5.0).
const release = "0b55854"

// buildRelease builds the githubbinding controller of commit from the
// repository's history: git archive of the commit into a directory of
// the test, built there with the go command and its build cache (only
// bindkit's own packages compile: about 30 CPU seconds). Without git or
// the commit it skips t, saying why; under CI=true it fails.
func buildRelease(t *testing.T, commit string) string {
	t.Helper()
	missing := func(format string, args ...any) {
		t.Helper()
		msg := fmt.Sprintf(format, args...) + ": the swap test builds the release before from the repository's history (a full clone of main has it)"
		if testenv.InCI() {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	if _, err := exec.LookPath("git"); err != nil {
		missing("no git: %v", err)
	}
	if out, err := exec.Command("git", "-C", repoRoot, "cat-file", "-e", commit+"^{commit}").CombinedOutput(); err != nil {
		missing("commit %s not in this clone: %v %s", commit, err, out)
	}
	dir := filepath.Join(t.TempDir(), "bindkit-"+commit)
	archive, err := exec.Command("git", "-C", repoRoot, "archive", "--format=tar", commit).Output()
	if err != nil {
		t.Fatalf("git archive %s: %v", commit, err)
	}
	if err := untar(bytes.NewReader(archive), dir); err != nil {
		t.Fatalf("git archive %s: %v", commit, err)
	}
	binary := filepath.Join(dir, "githubbinding-controller-"+commit)
	start := time.Now()
	if err := demo.BuildPackage(t.Context(), dir, demo.ControllerPackage, binary); err != nil {
		t.Fatalf("build the controller of %s: %v", commit, err)
	}
	t.Logf("built the controller of %s in %v", commit, time.Since(start).Round(time.Second))
	return binary
}

// untar writes the regular files and directories of a tar stream under
// dir.
func untar(r io.Reader, dir string) error {
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		path := filepath.Join(dir, filepath.FromSlash(h.Name))
		if !strings.HasPrefix(path, filepath.Clean(dir)+string(filepath.Separator)) {
			return fmt.Errorf("%s: outside the archive's directory", h.Name)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(path, 0o755)
		case tar.TypeReg:
			err = writeFile(path, tr, os.FileMode(h.Mode).Perm())
		}
		if err != nil {
			return err
		}
	}
}

func writeFile(path string, r io.Reader, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// service stands in for the controller's Service: the webhook
// configuration reaches it, and it forwards each connection to the
// replica it points at, as kube-proxy forwards to a ready endpoint; a
// connection opened before a switch stays with its replica until one side
// closes it.
type service struct {
	ln      net.Listener
	backend atomic.Int32
	wg      sync.WaitGroup
}

func startService(t *testing.T) *service {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &service{ln: ln}
	s.wg.Go(func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			s.wg.Go(func() { s.forward(conn) })
		}
	})
	t.Cleanup(func() {
		ln.Close()
		s.wg.Wait()
	})
	return s
}

// port is where the service listens.
func (s *service) port() int { return s.ln.Addr().(*net.TCPAddr).Port }

// point sends new connections to port.
func (s *service) point(port int) { s.backend.Store(int32(port)) }

func (s *service) forward(conn net.Conn) {
	defer conn.Close()
	backend, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(int(s.backend.Load()))), time.Second)
	if err != nil {
		return
	}
	defer backend.Close()
	done := make(chan struct{}, 2)
	go func() { io.Copy(backend, conn); done <- struct{}{} }()
	go func() { io.Copy(conn, backend); done <- struct{}{} }()
	<-done
}

// leaseName is the controller's Lease in the system namespace: its
// component name, in both releases.
const leaseName = "githubbinding-controller"

// leaseHolder is the identity holding the controller's Lease, "" when
// none does.
func leaseHolder(ctx context.Context, kube kubernetes.Interface) string {
	l, err := kube.CoordinationV1().Leases(demo.SystemNamespace).Get(ctx, leaseName, metav1.GetOptions{})
	if err != nil || l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// poll calls check every 200ms until it returns "", for at most timeout,
// and fails t with what check last said; it returns how long it took.
func poll(t *testing.T, timeout time.Duration, what string, check func(ctx context.Context) (string, error)) time.Duration {
	t.Helper()
	start := time.Now()
	var last string
	err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		var err error
		last, err = check(ctx)
		if err != nil {
			last = err.Error()
		}
		return last == "", nil
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v (last: %s)", what, err, last)
	}
	return time.Since(start)
}

// createSystemNamespace creates the namespace the controllers run in.
func createSystemNamespace(t *testing.T, kube kubernetes.Interface) {
	t.Helper()
	if _, err := kube.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: demo.SystemNamespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}
