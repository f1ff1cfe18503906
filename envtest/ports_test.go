package envtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestTakenPortsAreRetriedWithRealControlPlane hands every process of a
// control plane with workloads, on its first start, a port another process
// holds (etcd twice: its client port, then its peer port), as happens when
// a port chosen free is taken before the bind. Start still succeeds: each
// process is started again on new ports, and nothing of the failed
// attempts is left running.
func TestTakenPortsAreRetriedWithRealControlPlane(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	takenPort := taken.Addr().(*net.TCPAddr).Port

	// Which of the ports each successive pick hands over taken: etcd's
	// client, then its peer port, then each process's one port, and the
	// retry of each fresh.
	script := []int{0, 1, -1, 0, -1, 0, -1, 0, -1, 0, -1}
	var mu sync.Mutex
	picks := 0
	pick := func(n int) ([]int, error) {
		ports, err := freePorts(n)
		if err != nil {
			return nil, err
		}
		mu.Lock()
		defer mu.Unlock()
		if picks < len(script) && script[picks] >= 0 {
			ports[script[picks]] = takenPort
		}
		picks++
		return ports, nil
	}
	log := &stampedLog{start: time.Now()}
	env, err := Start(context.Background(), Options{Workloads: true, Progress: log, pickPorts: pick})
	switch {
	case errors.Is(err, ErrBinariesMissing) && !InCI():
		t.Skipf("integration test needs a control plane: %v", err)
	case err != nil:
		t.Fatalf("Start with taken ports: %v\nprogress:\n%s", err, log.String())
	}
	defer func() {
		if err := env.Stop(); err != nil {
			t.Errorf("Stop: %v", err)
		}
	}()
	var retried []string
	for line := range strings.SplitSeq(log.String(), "\n") {
		_, line, _ = strings.Cut(line, "s ") // the time stamp
		if what, _, ok := strings.Cut(line, ": a port of "); ok {
			retried = append(retried, what)
		}
	}
	want := []string{"etcd", "etcd", apiServerBinary, controllerManagerBinary, schedulerBinary, kwokBinary}
	if diff := cmp.Diff(want, retried); diff != "" {
		t.Errorf("processes retried on new ports (-want +got):\n%s\nprogress:\n%s", diff, log.String())
	}
	t.Logf("progress:\n%s", log.String())
	if picks != len(script) {
		t.Errorf("ports picked %d times, want %d", picks, len(script))
	}
	if got := len(env.PIDs()); got != 5 {
		t.Errorf("PIDs() = %v, want 5 processes", env.PIDs())
	}
}

// stampedLog keeps progress lines with the time since start.
type stampedLog struct {
	start time.Time
	b     strings.Builder
}

func (l *stampedLog) Write(p []byte) (int, error) {
	fmt.Fprintf(&l.b, "%6.2fs %s", time.Since(l.start).Seconds(), p)
	return len(p), nil
}

func (l *stampedLog) String() string { return l.b.String() }

// A start that fails for another reason than a taken port is not retried.
func TestOnFreePortsRetriesOnlyATakenPort(t *testing.T) {
	tests := []struct {
		name      string
		errs      []error
		wantCalls int
		wantErr   string
	}{
		{name: "success", errs: []error{nil}, wantCalls: 1},
		{name: "taken, then bound", errs: []error{errors.New("etcd exited early: bind: address already in use"), nil}, wantCalls: 2},
		{name: "another failure", errs: []error{errors.New("etcd exited early: permission denied")}, wantCalls: 1, wantErr: "permission denied"},
		{name: "taken every time", errs: []error{errors.New("address already in use")}, wantCalls: portAttempts, wantErr: "address already in use"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			calls := 0
			opts := Options{}
			err := opts.onFreePorts("test", 2, func(ports []int) error {
				if len(ports) != 2 || ports[0] == ports[1] {
					t.Errorf("ports %v, want two distinct", ports)
				}
				err := tt.errs[min(calls, len(tt.errs)-1)]
				calls++
				return err
			})
			if calls != tt.wantCalls {
				t.Errorf("start called %d times, want %d", calls, tt.wantCalls)
			}
			if (err == nil) != (tt.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tt.wantErr)) {
				t.Errorf("error = %v, want %q", err, tt.wantErr)
			}
		})
	}
}
