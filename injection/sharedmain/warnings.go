package sharedmain

import (
	"sync"

	"go.uber.org/zap"
)

// maxWarningTexts bounds the warnings a warningLog remembers.
const maxWarningTexts = 1024

// warningLog is the process's rest.WarningHandler: a warning the
// kube-apiserver sends with a response ("Warning: 299 ..." headers) is
// logged the first time its text comes, at Warn. Subjects that share a
// flaw (a sidecar repeating the app's container ports, a deprecated field)
// draw the same warnings at every write, and a reconciler binding
// thousands of them would log each at every patch (four lines a patch for
// the Deployment of bench/'s BenchmarkBind: 4,000 lines, and 5% of the
// controller's CPU, binding 1,000). It remembers at most maxWarningTexts
// texts; past that it logs every warning, rather than grow.
type warningLog struct {
	logger *zap.Logger
	mu     sync.Mutex
	seen   map[string]struct{}
}

func newWarningLog(logger *zap.Logger) *warningLog {
	return &warningLog{logger: logger, seen: map[string]struct{}{}}
}

// HandleWarningHeader implements rest.WarningHandler. Warnings of another
// code than 299 (none are defined) are dropped, as client-go drops them.
func (w *warningLog) HandleWarningHeader(code int, agent, text string) {
	if code != 299 || text == "" {
		return
	}
	w.mu.Lock()
	_, seen := w.seen[text]
	remembered := !seen && len(w.seen) < maxWarningTexts
	if remembered {
		w.seen[text] = struct{}{}
	}
	w.mu.Unlock()
	if seen {
		return
	}
	fields := []zap.Field{zap.String("warning", text)}
	if agent != "" && agent != "-" {
		fields = append(fields, zap.String("agent", agent))
	}
	if remembered {
		fields = append(fields, zap.String("repeats", "logged once per process"))
	}
	w.logger.Warn("kube-apiserver warning", fields...)
}
