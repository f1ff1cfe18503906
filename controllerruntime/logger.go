package controllerruntime

import (
	"errors"
	"slices"

	"github.com/go-logr/logr"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// zapFromLogr returns a zap.Logger that writes to l: bindkit logs with
// zap, a Manager with logr. When l is zap underneath (controller-runtime's
// pkg/log/zap, zapr), its zap.Logger is used as it is.
func zapFromLogr(l logr.Logger) *zap.Logger {
	if u, ok := l.GetSink().(interface{ GetUnderlying() *zap.Logger }); ok {
		return u.GetUnderlying()
	}
	return zap.New(&logrCore{l: l})
}

// logrCore is a zapcore.Core over a logr.Logger: zap's info is logr's
// V(0), debug V(1); error and above go to logr's Error.
type logrCore struct {
	l      logr.Logger
	fields []zapcore.Field
}

func verbosity(level zapcore.Level) int {
	if level >= zapcore.InfoLevel {
		return 0
	}
	return int(zapcore.InfoLevel - level)
}

func (c *logrCore) Enabled(level zapcore.Level) bool {
	return level >= zapcore.ErrorLevel || c.l.V(verbosity(level)).Enabled()
}

func (c *logrCore) With(fields []zapcore.Field) zapcore.Core {
	return &logrCore{l: c.l, fields: append(slices.Clip(c.fields), fields...)}
}

func (c *logrCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c *logrCore) Write(e zapcore.Entry, fields []zapcore.Field) error {
	enc := zapcore.NewMapObjectEncoder()
	for _, f := range c.fields {
		f.AddTo(enc)
	}
	for _, f := range fields {
		f.AddTo(enc)
	}
	// zap.Error's field is logr's err argument.
	var err error
	if msg, ok := enc.Fields["error"].(string); ok && e.Level >= zapcore.ErrorLevel {
		err = errors.New(msg)
		delete(enc.Fields, "error")
	}
	keys := make([]string, 0, len(enc.Fields))
	for k := range enc.Fields {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	kv := make([]any, 0, 2*len(keys))
	for _, k := range keys {
		kv = append(kv, k, enc.Fields[k])
	}
	l := c.l
	if e.LoggerName != "" {
		l = l.WithName(e.LoggerName)
	}
	if e.Level >= zapcore.ErrorLevel {
		l.Error(err, e.Message, kv...)
		return nil
	}
	l.V(verbosity(e.Level)).Info(e.Message, kv...)
	return nil
}

func (c *logrCore) Sync() error { return nil }
