package envtest

import (
	"fmt"
	"net"
	"strings"
)

// portAttempts is how many sets of ports onFreePorts tries for one process.
// A port is taken between its choice and the bind only when another
// process binds port 0 (or connects) at that moment and the kernel gives
// it the same one; five times in a row does not happen.
const portAttempts = 5

// onFreePorts calls start with n ports of 127.0.0.1 that were free a
// moment ago, and again with new ones while it fails because one of them
// was taken by then ("address already in use" in the error, which quotes
// the process's log), at most portAttempts times. start must leave no
// process running when it fails. what names the process in the progress
// line of a retry.
func (o *Options) onFreePorts(what string, n int, start func(ports []int) error) error {
	pick := o.pickPorts
	if pick == nil {
		pick = freePorts
	}
	for attempt := 1; ; attempt++ {
		ports, err := pick(n)
		if err != nil {
			return err
		}
		err = start(ports)
		if err == nil || attempt == portAttempts || !portTaken(err) {
			return err
		}
		progress(o.Progress, "%s: a port of %v was taken before it could bind it; retrying with new ports (attempt %d of %d)", what, ports, attempt+1, portAttempts)
	}
}

// portTaken reports whether err says a bind failed because the port was
// in use: the control-plane binaries say so in their logs, which the
// start errors quote.
func portTaken(err error) bool {
	return strings.Contains(err.Error(), "address already in use")
}

// FreePort asks the kernel for a free port on 127.0.0.1, for a server a
// test starts beside the control plane that cannot bind port 0 and report
// the port it got. Another process may take the port before the server
// binds it, so a caller retries on "address already in use"; bindkit's
// own processes bind port 0 instead (sharedmain's --listen-addresses-file).
func FreePort() (int, error) {
	ports, err := freePorts(1)
	if err != nil {
		return 0, err
	}
	return ports[0], nil
}

// freePorts asks the kernel for n distinct free ports on 127.0.0.1.
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("find a free port: %w", err)
		}
		// Keep each listener open until all are chosen so none repeats.
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
