package sharedmain

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"go.uber.org/zap"
)

// ListenAddresses is what a process writes to Flags.ListenAddressesFile,
// as JSON: the address, host:port, that each of its listeners is bound
// to, with the port the kernel gave when port 0 was asked for. A listener
// the process does not run is empty (and absent from the file).
type ListenAddresses struct {
	// Webhook is the webhook's HTTPS listener (--webhook-port).
	Webhook string `json:"webhook,omitempty"`
	// Probes serves /healthz and /readyz over HTTP (--probe-port): in a
	// process without a webhook, or beside one that requires client
	// certificates.
	Probes string `json:"probes,omitempty"`
	// Metrics serves /metrics (--metrics-address): over HTTPS to
	// authorized callers, or over HTTP with --metrics-secure=false.
	Metrics string `json:"metrics,omitempty"`
}

// WebhookPort is the port of Webhook, 0 when none runs.
func (a ListenAddresses) WebhookPort() int { return portOf(a.Webhook) }

// ProbePort is the port of Probes, 0 when none runs.
func (a ListenAddresses) ProbePort() int { return portOf(a.Probes) }

func portOf(hostport string) int {
	_, port, err := net.SplitHostPort(hostport)
	if err != nil {
		return 0
	}
	n, _ := strconv.Atoi(port)
	return n
}

// ReadListenAddresses reads a file a process wrote for
// Flags.ListenAddressesFile. Until the process has written it, the error
// satisfies errors.Is(err, fs.ErrNotExist).
func ReadListenAddresses(path string) (ListenAddresses, error) {
	var a ListenAddresses
	data, err := os.ReadFile(path)
	if err != nil {
		return a, fmt.Errorf("listen addresses: %w", err)
	}
	if err := json.Unmarshal(data, &a); err != nil {
		return a, fmt.Errorf("listen addresses: %s: %w", path, err)
	}
	return a, nil
}

// listenAddressesPoll is how often WaitListenAddresses looks for the file.
const listenAddressesPoll = 20 * time.Millisecond

// WaitListenAddresses waits until a process has written path
// (Flags.ListenAddressesFile) and returns what it holds. It returns
// ctx's error, naming the file, if ctx ends first: a caller bounds the
// wait with ctx, and cancels it when the process exits.
func WaitListenAddresses(ctx context.Context, path string) (ListenAddresses, error) {
	tick := time.NewTicker(listenAddressesPoll)
	defer tick.Stop()
	for {
		a, err := ReadListenAddresses(path)
		if !errors.Is(err, fs.ErrNotExist) {
			return a, err
		}
		select {
		case <-ctx.Done():
			return a, fmt.Errorf("listen addresses: %s not written: %w", path, context.Cause(ctx))
		case <-tick.C:
		}
	}
}

// listen opens the process's listeners: the webhook's (and, when the
// webhook asks for client certificates, the probes' beside it) when it
// serves a webhook, else the probes'; and the metrics' when it has
// metrics and they are on. It returns probeHandler, the probes to serve on
// ln, when ln is the probes' listener. On an error it has closed what it
// opened.
func (p *process) listen(webhookServer, hasMetrics bool) (ln, webhookProbeLn, metricsLn net.Listener, probeHandler *probes, err error) {
	if webhookServer {
		ln, err = listen("webhook", p.flags.WebhookAddress, p.flags.WebhookPort)
		if err == nil && p.flags.Webhook.ClientCAFile != "" {
			// The kubelet's probes present no client certificate.
			if webhookProbeLn, err = listen("probes", "", p.flags.ProbePort); err != nil {
				ln.Close()
			}
		}
	} else {
		probeHandler = &probes{}
		ln, err = listen("probes", "", p.flags.ProbePort)
	}
	if err != nil {
		return nil, nil, nil, nil, err
	}
	if hasMetrics && p.flags.MetricsAddress != MetricsOff {
		if metricsLn, err = net.Listen("tcp", p.flags.MetricsAddress); err != nil {
			closeAll(ln, webhookProbeLn)
			return nil, nil, nil, nil, fmt.Errorf("metrics: listen on %s (--metrics-address): %w", p.flags.MetricsAddress, err)
		}
		p.metricsAddr = metricsLn.Addr()
	}
	return ln, webhookProbeLn, metricsLn, probeHandler, nil
}

// listen listens on address and port, AnyPort meaning one the kernel
// picks.
func listen(what, address string, port int) (net.Listener, error) {
	if port == AnyPort {
		port = 0
	}
	addr := net.JoinHostPort(address, strconv.Itoa(port))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%s: listen on %s: %w", what, addr, err)
	}
	return ln, nil
}

// reportListeners logs where the listeners p.listen opened are bound and
// writes the same to Flags.ListenAddressesFile when it is set. ln is the
// probes' listener when lnIsProbes, the webhook's otherwise.
func (p *process) reportListeners(ln, webhookProbeLn, metricsLn net.Listener, lnIsProbes bool) error {
	var a ListenAddresses
	if lnIsProbes {
		a.Probes = ln.Addr().String()
	} else {
		a.Webhook = ln.Addr().String()
	}
	if webhookProbeLn != nil {
		a.Probes = webhookProbeLn.Addr().String()
	}
	if metricsLn != nil {
		a.Metrics = metricsLn.Addr().String()
	}
	p.logger.Info("listening", zap.String("webhook", a.Webhook), zap.String("probes", a.Probes), zap.String("metrics", a.Metrics))
	if p.flags.ListenAddressesFile == "" {
		return nil
	}
	if err := writeListenAddresses(p.flags.ListenAddressesFile, a); err != nil {
		return fmt.Errorf("--listen-addresses-file: %w", err)
	}
	return nil
}

// writeListenAddresses writes a to path through a temporary file beside
// it and a rename, so a reader sees the whole file or none.
func writeListenAddresses(path string, a ListenAddresses) error {
	data, err := json.Marshal(a)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	_, err = tmp.Write(append(data, '\n'))
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
	}
	return err
}

// closeAll closes the listeners that are not nil.
func closeAll(lns ...net.Listener) {
	for _, ln := range lns {
		if ln != nil {
			ln.Close()
		}
	}
}
