package testenv

import (
	"io"
	"net"
	"strconv"
	"testing"
)

// Forwarder listens on 127.0.0.1 and passes each connection to the first
// of backends (ports on 127.0.0.1) that accepts one, as a Service passes a
// call to an endpoint that is up: the webhook configuration of tests that
// run two replicas points at it, and the kube-apiserver reaches whichever
// replica still serves. It returns its port; the listener closes when
// the test ends.
func Forwarder(t testing.TB, backends ...int) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go forward(c, backends)
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port
}

// forward joins c to the first backend that accepts a connection, until
// either side ends; with none up, c is closed.
func forward(c net.Conn, backends []int) {
	defer c.Close()
	for _, port := range backends {
		up, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			continue
		}
		defer up.Close()
		done := make(chan struct{}, 2)
		go func() { io.Copy(up, c); done <- struct{}{} }()
		go func() { io.Copy(c, up); done <- struct{}{} }()
		<-done
		return
	}
}
