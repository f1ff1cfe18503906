package sharedmain

import (
	"flag"
	"fmt"
	"strconv"
	"sync"

	"github.com/go-logr/logr"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"k8s.io/klog/v2"

	"github.com/bindkit/bindkit/internal/processwide"
)

// klog is client-go's logger: leader election, reflectors, the rate
// limiter's throttling and the event broadcaster log through it. Without
// a logger of its own it writes text to stderr beside the process's JSON;
// routed here, its lines become zap entries of the process's logger, named
// "klog", at the process's level.
//
// klog's logger is process-wide and not safe to replace while anything
// logs, so it is set once, to a sink that forwards to the logger of the
// Run that attached last and is still running (see package
// internal/processwide); a test binary that runs several processes sees
// client-go's lines in the latest one's log.
var (
	klogOnce sync.Once
	klogSlot processwide.Slot[klogTarget]
)

// maxKlogVerbosity is the most detailed klog level that reaches the log,
// and only at debug: 4 is client-go's "debug" detail (reflectors starting
// and stopping, watches closing). Request URLs (6), headers (7) and
// bodies (8, where a Secret's keys would be) never do.
const maxKlogVerbosity = 4

// klogTarget is where klog's lines go while a Run is attached.
type klogTarget struct {
	logger *zap.Logger
	level  zap.AtomicLevel
}

// routeKlog sends klog's lines to logger, filtered by level (which
// config-logging changes at run time), until detach is called. klog's V(0)
// lines are info; V(1) to V(maxKlogVerbosity) are debug, so they show
// when the process logs at debug.
func routeKlog(logger *zap.Logger, level zap.AtomicLevel) (detach func()) {
	klogOnce.Do(func() {
		// klog checks its own verbosity before it calls the sink on its
		// traditional calls (klog.V(n).Infof); let everything up to
		// maxKlogVerbosity through and filter by the level in the sink.
		var fs flag.FlagSet
		klog.InitFlags(&fs)
		_ = fs.Set("v", strconv.Itoa(maxKlogVerbosity)) // a valid value
		// Contextual: client-go's klog.FromContext(ctx) gets the sink
		// directly, without klog's text formatting on the way.
		klog.SetLoggerWithOptions(logr.New(&klogSink{}), klog.ContextualLogger(true))
	})
	return klogSlot.Attach(&klogTarget{logger: logger.Named("klog"), level: level})
}

// zapLevelOf maps a klog verbosity to a zap level.
func zapLevelOf(v int) zapcore.Level {
	if v <= 0 {
		return zapcore.InfoLevel
	}
	return zapcore.DebugLevel
}

// klogSink is the logr.LogSink klog writes to. It is written here rather
// than taken from go-logr/zapr because it must follow the attached Run's
// logger and level at every line, cap klog's verbosity, and render objects
// by name rather than whole; with that, zapr's mapping would be all that
// was left of it.
type klogSink struct {
	names  []string
	values []any
}

var _ logr.LogSink = (*klogSink)(nil)

func (s *klogSink) Init(logr.RuntimeInfo) {}

func (s *klogSink) Enabled(v int) bool {
	t := klogSlot.Load()
	return t != nil && v <= maxKlogVerbosity && t.level.Enabled(zapLevelOf(v))
}

func (s *klogSink) Info(v int, msg string, kv ...any) {
	if t := klogSlot.Load(); t != nil && v <= maxKlogVerbosity {
		s.write(t, zapLevelOf(v), msg, kv, nil)
	}
}

func (s *klogSink) Error(err error, msg string, kv ...any) {
	if t := klogSlot.Load(); t != nil {
		s.write(t, zapcore.ErrorLevel, msg, kv, err)
	}
}

func (s *klogSink) write(t *klogTarget, level zapcore.Level, msg string, kv []any, err error) {
	logger := t.logger
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
