package sharedmain

import (
	"context"
	"os"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"

	"github.com/bindkit/bindkit/configmap"
)

// ConfigLoggingName is the ConfigMap in the system namespace whose key
// LogLevelKey(component) sets the component's log level at run time.
const ConfigLoggingName = "config-logging"

// LogLevelKey returns the config-logging key that holds component's log
// level: "loglevel.<component>", a zap level name (debug, info, warn,
// error, dpanic, panic, fatal). A missing ConfigMap or key means info.
func LogLevelKey(component string) string { return "loglevel." + component }

// newLogger returns the process's JSON logger at level, writing to the
// output in ctx or os.Stderr.
func newLogger(ctx context.Context, component string, level zap.AtomicLevel) *zap.Logger {
	out, ok := ctx.Value(logOutputKey{}).(zapcore.WriteSyncer)
	if !ok {
		out = zapcore.Lock(os.Stderr)
	}
	enc := zap.NewProductionEncoderConfig()
	enc.EncodeTime = zapcore.RFC3339NanoTimeEncoder
	core := zapcore.NewCore(zapcore.NewJSONEncoder(enc), out, level)
	return zap.New(core, zap.ErrorOutput(out)).With(zap.String("component", component))
}

// levelFrom returns the level in ctx (WithLogLevel), else a new one at info.
func levelFrom(ctx context.Context) zap.AtomicLevel {
	if level, ok := ctx.Value(logLevelKey{}).(zap.AtomicLevel); ok {
		return level
	}
	return zap.NewAtomicLevelAt(zapcore.InfoLevel)
}

// levelObserver sets level from config-logging. A value that is not a level
// is reported and ignored, so a typo never silences the process.
func levelObserver(component string, level zap.AtomicLevel, logger *zap.Logger) configmap.Observer {
	key := LogLevelKey(component)
	return func(cm *corev1.ConfigMap) {
		want := zapcore.InfoLevel
		var text string
		if cm != nil {
			text = cm.Data[key]
		}
		if text != "" {
			parsed, err := zapcore.ParseLevel(text)
			if err != nil {
				logger.Error("ignoring invalid log level", zap.String("configMap", ConfigLoggingName), zap.String("key", key), zap.Error(err))
				return
			}
			want = parsed
		}
		if level.Level() == want {
			return
		}
		logger.Info("log level changed", zap.Stringer("from", level.Level()), zap.Stringer("to", want))
		level.SetLevel(want)
	}
}
