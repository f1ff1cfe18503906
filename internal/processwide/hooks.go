package processwide

import (
	"context"
	"flag"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	clientmetrics "k8s.io/client-go/tools/metrics"
	"k8s.io/klog/v2"
)

// Install sets klog's logger and client-go's metric hooks, once per
// process, to forwarders that follow KlogSlot and ClientGoSlot. Both are
// process-wide variables that client-go reads on every request without a
// lock, so Install must run before anything else in the process uses
// client-go concurrently: injection/sharedmain.Run calls it first, and a
// test binary that runs Run while its own clients work calls it before
// its tests start (test/testenv's Main does). Later calls do nothing.
func Install() {
	installOnce.Do(func() {
		// klog checks its verbosity before it calls the sink on its
		// traditional calls (klog.V(n).Infof); let everything up to
		// MaxKlogVerbosity through and filter by level in the sink.
		var fs flag.FlagSet
		klog.InitFlags(&fs)
		_ = fs.Set("v", strconv.Itoa(MaxKlogVerbosity)) // a valid value
		// Contextual: client-go's klog.FromContext(ctx) gets the sink
		// directly, without klog's text formatting on the way.
		klog.SetLoggerWithOptions(logr.New(&klogSink{}), klog.ContextualLogger(true))
		clientmetrics.Register(clientmetrics.RegisterOpts{
			RequestLatency:     requestLatency{},
			RateLimiterLatency: rateLimiterLatency{},
			RequestResult:      requestResult{},
		})
	})
}

var installOnce sync.Once

// ClientGoMetrics receives client-go's request metrics while attached to
// ClientGoSlot. Its methods are called from every request's goroutine,
// concurrently, and must be quick. No URL or host is passed on: they name
// objects and servers, and metric labels must stay bounded.
type ClientGoMetrics interface {
	RequestLatency(verb string, d time.Duration)
	RateLimiterLatency(verb string, d time.Duration)
	RequestResult(code, method string)
}

// ClientGoSlot is where client-go's request metrics go once Install has
// run: to the ClientGoMetrics attached last and still attached, or
// nowhere.
var ClientGoSlot Slot[ClientGoMetrics]

type (
	requestLatency     struct{}
	rateLimiterLatency struct{}
	requestResult      struct{}
)

func (requestLatency) Observe(_ context.Context, verb string, _ url.URL, d time.Duration) {
	if m := ClientGoSlot.Load(); m != nil {
		(*m).RequestLatency(verb, d)
	}
}

func (rateLimiterLatency) Observe(_ context.Context, verb string, _ url.URL, d time.Duration) {
	if m := ClientGoSlot.Load(); m != nil {
		(*m).RateLimiterLatency(verb, d)
	}
}

func (requestResult) Increment(_ context.Context, code, method, _ string) {
	if m := ClientGoSlot.Load(); m != nil {
		(*m).RequestResult(code, method)
	}
}

// MaxKlogVerbosity is the most detailed klog level that reaches a log,
// and only at debug: 4 is client-go's "debug" detail (reflectors starting
// and stopping, watches closing). Request URLs (6), headers (7) and
// bodies (8, where a Secret's keys would be) never do.
const MaxKlogVerbosity = 4

// KlogTarget is where klog's lines go while attached to KlogSlot: Logger,
// filtered by Level (which may change at run time).
type KlogTarget struct {
	Logger *zap.Logger
	Level  zap.AtomicLevel
}

// KlogSlot is where klog's lines go once Install has run: to the
// KlogTarget attached last and still attached, else to fallback.
var KlogSlot Slot[KlogTarget]

// fallback takes klog's lines while no target is attached, as klog
// itself would have: info and above, to stderr (as JSON).
var fallback = sync.OnceValue(func() *KlogTarget {
	enc := zap.NewProductionEncoderConfig()
	enc.EncodeTime = zapcore.RFC3339NanoTimeEncoder
	level := zap.NewAtomicLevelAt(zapcore.InfoLevel)
	core := zapcore.NewCore(zapcore.NewJSONEncoder(enc), zapcore.Lock(os.Stderr), level)
	return &KlogTarget{Logger: zap.New(core).Named("klog"), Level: level}
})

func klogTarget() *KlogTarget {
	if t := KlogSlot.Load(); t != nil {
		return t
	}
	return fallback()
}

// klogLevel maps a klog verbosity to a zap level: V(0) is info, more
// detailed lines are debug.
func klogLevel(v int) zapcore.Level {
	if v <= 0 {
		return zapcore.InfoLevel
	}
	return zapcore.DebugLevel
}

// klogSink is the logr.LogSink klog writes to. It is written here rather
// than taken from go-logr/zapr because it must follow the attached
// target's logger and level at every line, cap klog's verbosity, and
// render objects by name rather than whole.
type klogSink struct {
	names  []string
	values []any
}

var _ logr.LogSink = (*klogSink)(nil)

func (s *klogSink) Init(logr.RuntimeInfo) {}

func (s *klogSink) Enabled(v int) bool {
	return v <= MaxKlogVerbosity && klogTarget().Level.Enabled(klogLevel(v))
}

func (s *klogSink) Info(v int, msg string, kv ...any) {
	if v <= MaxKlogVerbosity {
		s.write(klogTarget(), klogLevel(v), msg, kv, nil)
	}
}

func (s *klogSink) Error(err error, msg string, kv ...any) {
	s.write(klogTarget(), zapcore.ErrorLevel, msg, kv, err)
}

func (s *klogSink) write(t *KlogTarget, level zapcore.Level, msg string, kv []any, err error) {
	logger := t.Logger
	for _, name := range s.names {
		logger = logger.Named(name)
	}
	ce := logger.Check(level, msg)
	if ce == nil {
		return
	}
	fields := make([]zap.Field, 0, (len(s.values)+len(kv))/2+1)
	fields = appendFields(fields, s.values)
	fields = appendFields(fields, kv)
	if err != nil {
		fields = append(fields, zap.Error(err))
	}
	ce.Write(fields...)
}

func (s *klogSink) WithValues(kv ...any) logr.LogSink {
	c := *s
	c.values = append(append([]any(nil), s.values...), kv...)
	return &c
}

func (s *klogSink) WithName(name string) logr.LogSink {
	c := *s
	c.names = append(append([]string(nil), s.names...), name)
	return &c
}

// namedObject is a Kubernetes object, logged by its namespace and name.
type namedObject interface {
	GetNamespace() string
	GetName() string
}

// appendFields turns logr's key-value pairs into zap fields. An object is
// logged as "namespace/name", never whole: client-go passes objects it
// handles, Secrets among them, and their content does not belong in a log.
func appendFields(fields []zap.Field, kv []any) []zap.Field {
	for i := 0; i < len(kv); i += 2 {
		key, ok := kv[i].(string)
		if !ok {
			key = fmt.Sprint(kv[i])
		}
		if i+1 == len(kv) {
			fields = append(fields, zap.String(key, "(MISSING)"))
			break
		}
		switch v := kv[i+1].(type) {
		case klog.ObjectRef:
			fields = append(fields, zap.String(key, v.String()))
		case namedObject:
			fields = append(fields, zap.String(key, klog.KRef(v.GetNamespace(), v.GetName()).String()))
		case logr.Marshaler:
			fields = append(fields, zap.Any(key, v.MarshalLog()))
		default:
			fields = append(fields, zap.Any(key, v))
		}
	}
	return fields
}
