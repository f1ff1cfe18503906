package sharedmain

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/bindkit/bindkit/webhook"
)

// DefaultProbePort is where health probes are served when the process runs
// no webhook (the webhook server serves them otherwise).
const DefaultProbePort = 8080

// Flags are the settings Main reads from the command line and
// MainWithContext from its context (WithFlags). A zero port or grace period
// takes its default, as DefaultFlags shows.
type Flags struct {
	// Kubeconfig is a kubeconfig file (--kubeconfig). When it and
	// $KUBECONFIG are empty, the in-cluster configuration is used.
	Kubeconfig string
	// Server overrides the API server URL (--server).
	Server string
	// DisableHA turns leader election off (--disable-ha): every controller
	// is promoted at once, as for a single replica.
	DisableHA bool
	// WebhookAddress is the host the webhook listens on (--webhook-address);
	// empty means all interfaces.
	WebhookAddress string
	// WebhookPort is the webhook's HTTPS port (--webhook-port, default
	// webhook.DefaultPort).
	WebhookPort int
	// WebhookIPSANs are IP addresses added to the serving certificate
	// (--webhook-ip-sans, comma-separated), for a webhook reached by IP out
	// of cluster, e.g. 127.0.0.1.
	WebhookIPSANs []net.IP
	// WebhookGracePeriod is how long the webhook keeps serving, unready,
	// after shutdown begins (--webhook-grace-period, default
	// webhook.DefaultGracePeriod); negative means no wait.
	WebhookGracePeriod time.Duration
	// ProbePort serves /healthz and /readyz over HTTP when no webhook runs,
	// or when the webhook requires client certificates (--probe-port,
	// default DefaultProbePort).
	ProbePort int
	// WebhookBounds bound what the webhook's callers may send, and may
	// require a client certificate (--webhook-read-timeout,
	// --webhook-max-*, --webhook-client-ca).
	WebhookBounds WebhookBounds
}

// DefaultFlags returns the settings of a command line without flags.
func DefaultFlags() Flags {
	return Flags{
		WebhookPort:        webhook.DefaultPort,
		WebhookGracePeriod: webhook.DefaultGracePeriod,
		ProbePort:          DefaultProbePort,
		WebhookBounds:      DefaultWebhookBounds(),
	}
}

func (f Flags) withDefaults() Flags {
	d := DefaultFlags()
	if f.WebhookPort == 0 {
		f.WebhookPort = d.WebhookPort
	}
	if f.WebhookGracePeriod == 0 {
		f.WebhookGracePeriod = d.WebhookGracePeriod
	}
	if f.ProbePort == 0 {
		f.ProbePort = d.ProbePort
	}
	f.WebhookBounds = f.WebhookBounds.withDefaults()
	return f
}

// ParseFlags parses args (without the program name) with a flag set of its
// own, named component; usage and errors go to output (os.Stderr for Main).
// It returns flag.ErrHelp for -h and an error naming the flag for a bad
// value or a positional argument.
func ParseFlags(component string, args []string, output io.Writer) (Flags, error) {
	f := DefaultFlags()
	fs := flag.NewFlagSet(component, flag.ContinueOnError)
	fs.SetOutput(output)
	fs.StringVar(&f.Kubeconfig, "kubeconfig", "", "path to a kubeconfig; empty uses $KUBECONFIG, else the in-cluster configuration")
	fs.StringVar(&f.Server, "server", "", "API server URL, overriding the kubeconfig's or the in-cluster one")
	fs.BoolVar(&f.DisableHA, "disable-ha", false, "run without leader election: this replica writes as leader at once")
	fs.StringVar(&f.WebhookAddress, "webhook-address", "", "address the webhook listens on; empty means all interfaces")
	fs.IntVar(&f.WebhookPort, "webhook-port", f.WebhookPort, "HTTPS port of the webhook")
	fs.Func("webhook-ip-sans", "comma-separated IP addresses added to the webhook's serving certificate, e.g. 127.0.0.1", func(s string) error {
		ips, err := parseIPs(s)
		f.WebhookIPSANs = append(f.WebhookIPSANs, ips...)
		return err
	})
	fs.DurationVar(&f.WebhookGracePeriod, "webhook-grace-period", f.WebhookGracePeriod, "how long the webhook keeps serving, unready, after a shutdown signal; negative means none")
	fs.IntVar(&f.ProbePort, "probe-port", f.ProbePort, "HTTP port of /healthz and /readyz when no webhook runs, or when --webhook-client-ca is set")
	f.WebhookBounds.register(fs)
	if err := fs.Parse(args); err != nil {
		return Flags{}, err
	}
	if err := f.WebhookBounds.validate(); err != nil {
		return Flags{}, err
	}
	if fs.NArg() > 0 {
		return Flags{}, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	for _, p := range []struct {
		name string
		port int
	}{{"webhook-port", f.WebhookPort}, {"probe-port", f.ProbePort}} {
		if p.port < 1 || p.port > 65535 {
			return Flags{}, fmt.Errorf("--%s %d out of range 1-65535", p.name, p.port)
		}
	}
	return f, nil
}

func parseIPs(s string) ([]net.IP, error) {
	var out []net.IP
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		ip := net.ParseIP(part)
		if ip == nil {
			return nil, fmt.Errorf("%q is not an IP address", part)
		}
		out = append(out, ip)
	}
	return out, nil
}

type (
	flagsKey     struct{}
	logLevelKey  struct{}
	logOutputKey struct{}
)

// WithFlags returns a copy of ctx from which MainWithContext takes its
// settings. Without it MainWithContext uses DefaultFlags.
func WithFlags(ctx context.Context, f Flags) context.Context {
	return context.WithValue(ctx, flagsKey{}, f)
}

func flagsFrom(ctx context.Context) Flags {
	f, _ := ctx.Value(flagsKey{}).(Flags)
	return f.withDefaults()
}

// WithLogLevel returns a copy of ctx that makes MainWithContext log at
// level, which it then sets from the config-logging ConfigMap. The caller
// keeps the handle, so it can read the level the process runs at. Without
// it MainWithContext makes its own, starting at info.
func WithLogLevel(ctx context.Context, level zap.AtomicLevel) context.Context {
	return context.WithValue(ctx, logLevelKey{}, level)
}

// WithLogOutput returns a copy of ctx that makes MainWithContext write its
// JSON log lines to w instead of os.Stderr. w must be safe for concurrent
// use (zapcore.Lock makes it so).
func WithLogOutput(ctx context.Context, w zapcore.WriteSyncer) context.Context {
	return context.WithValue(ctx, logOutputKey{}, w)
}
