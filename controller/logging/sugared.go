package logging

import (
	"context"

	"go.uber.org/zap"
)

// SugaredFromContext returns FromContext(ctx).Sugar(): the logger in ctx with
// printf-style and loosely typed key-value methods (Infof, Errorw). It is
// what knative's logging.FromContext returns, so ported calls such as
// logging.FromContext(ctx).Infof(...) become SugaredFromContext(ctx).Infof(...).
// It never returns nil.
func SugaredFromContext(ctx context.Context) *zap.SugaredLogger {
	return FromContext(ctx).Sugar()
}
