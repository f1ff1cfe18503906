package logging

import (
	"context"

	"go.uber.org/zap"
)

// loggerKey is unexported so only this package can set or read the value.
type loggerKey struct{}

// WithLogger returns a copy of ctx that carries logger. A nil logger is
// stored as a no-op logger, so FromContext never returns nil.
func WithLogger(ctx context.Context, logger *zap.Logger) context.Context {
	if logger == nil {
		logger = zap.NewNop()
	}
	return context.WithValue(ctx, loggerKey{}, logger)
}

// FromContext returns the logger stored by WithLogger, or a no-op logger
// when ctx carries none. It never returns nil.
func FromContext(ctx context.Context) *zap.Logger {
	if logger, ok := ctx.Value(loggerKey{}).(*zap.Logger); ok {
		return logger
	}
	return zap.NewNop()
}
