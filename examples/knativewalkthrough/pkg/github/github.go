// Package github holds where a GithubBinding mounts its Secret, as the
// package of the same name does in the bindings repository the knative
// walkthrough is based on.
package github

const (
	// VolumeName is the pod volume Do adds and Undo removes.
	VolumeName = "github-binding"
	// MountPath is where every container sees the Secret's keys.
	MountPath = "/var/bindings/github"
)
