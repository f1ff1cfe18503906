package duck

// ErrNoPodTemplate is wrapped by the errors of a Shape's conversions when
// the workload has no pod template where the shape says it is: a custom
// kind whose template sits elsewhere (declare it with TemplateAt in
// Shapes), or none at all. Such a workload is never patched: a patch that
// adds a template the kind does not have would be pruned by the API server
// and sent again forever.
const ErrNoPodTemplate = constError("no pod template")
