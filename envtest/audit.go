package envtest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// auditPolicy logs every request but the read-only probes at Metadata
// level, once it has a response: who asked for what, and the answer.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: None
  nonResourceURLs: ["/healthz*", "/readyz*", "/livez*", "/version", "/openapi*"]
- level: Metadata
`

// AuditEvent is the part of a kube-apiserver audit event (audit.k8s.io/v1
// Event) that tests read: who sent which request and how it was answered.
type AuditEvent struct {
	Stage string `json:"stage"`
	Verb  string `json:"verb"`
	User  struct {
		Username string   `json:"username"`
		Groups   []string `json:"groups"`
	} `json:"user"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
		APIGroup    string `json:"apiGroup"`
		Subresource string `json:"subresource"`
	} `json:"objectRef"`
	RequestURI     string `json:"requestURI"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
}

// auditArgs writes the audit policy into dir and returns the
// kube-apiserver flags that log to AuditLogPath(dir).
func auditArgs(dir string) ([]string, error) {
	policy := filepath.Join(dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o600); err != nil {
		return nil, fmt.Errorf("write audit policy: %w", err)
	}
	return []string{
		"--audit-policy-file=" + policy,
		"--audit-log-path=" + auditLogPath(dir),
		"--audit-log-format=json",
		// Written as each request ends, so a test reads what happened so far.
		"--audit-log-mode=blocking",
	}, nil
}

func auditLogPath(dir string) string { return filepath.Join(dir, "audit.log") }

// AuditEvents returns the audit events the kube-apiserver has logged so far,
// in order. The environment must have been started with Options.Audit.
// Those of a control plane Attach found include what earlier test runs
// against it did.
func (e *Environment) AuditEvents() ([]AuditEvent, error) {
	path := e.auditLog
	if path == "" {
		path = auditLogPath(e.Dir)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("audit log (start the environment with Options.Audit): %w", err)
	}
	defer f.Close()
	var events []AuditEvent
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for s.Scan() {
		var ev AuditEvent
		if err := json.Unmarshal(s.Bytes(), &ev); err != nil {
			return nil, fmt.Errorf("audit log: %w", err)
		}
		events = append(events, ev)
	}
	return events, s.Err()
}
