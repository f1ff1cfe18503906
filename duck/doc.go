// Package duck holds the duck types Bindings work on and the machinery
// around them: converting workloads to and from the PodSpecable duck type,
// JSON patches between two versions of it, informers over the dynamic client
// that cache it, the Bindable contract and the kind-to-resource lookup.
//
// # The duck type
//
// A Binding's Do and Undo always see one *WithPod: the workload's metadata
// and its pod template. Where the template lives depends on the workload's
// Shape:
//
//   - PodSpecable (the default, and the zero Shape): spec.template.
//     Deployment, ReplicaSet, StatefulSet, DaemonSet, Job, and custom
//     resources that follow the convention.
//   - Pod: a bare Pod is its own template. Its metadata is both the
//     WithPod's ObjectMeta and the template's; its spec is the template's
//     spec. Patches put both metadata changes under /metadata and spec
//     changes under /spec.
//   - CronJob: spec.jobTemplate.spec.template.
//   - TemplateAt(path...): any other field path a custom resource declares,
//     e.g. TemplateAt("spec", "workload", "template").
//
// Shapes picks the shape from an object's kind. Its zero value knows the
// built-ins (batch CronJob, core Pod, everything else spec.template); a
// caller extends it with With and passes the result to whatever needs it.
// There is no global registry.
//
// # Decoding
//
// Shape.Decode reads a workload's JSON as the kube-apiserver does: field
// names match case-sensitively (sigs.k8s.io/json) and a field WithPod
// knows may not appear twice. A workload with no pod template where its
// shape looks (absent or null) decodes with an error wrapping
// ErrNoPodTemplate, beside its metadata; such a workload must never be
// patched. FromUnstructured reports the same. Shape.Scan measures the JSON
// first without allocating (list lengths, nesting, an estimate of the heap
// decoding takes), and DecodeChecked lets a caller refuse, or budget for,
// an object before any of it is decoded.
//
// # Patches
//
// Shape.CreatePatch diffs two WithPods, not two real objects: it compares
// the labels and annotations of the object and of the template, and the
// template's spec, and nothing else. A patch therefore never names a field
// the duck type does not know, and fields the real object has beyond
// WithPod (other spec fields, status, unknown fields a CRD preserves) are
// left as they are. No change gives an empty patch. Every patch applies to
// the JSON the WithPod was decoded from: where a zero value may be absent
// or null in that JSON (metadata, a template's metadata, an element of a
// list), the patch replaces it whole rather than reaching inside.
//
// # Informers
//
// TypedInformerFactory builds informers over the dynamic client whose cache
// holds *WithPod. EnqueueInformerFactory adds an event handler to each.
// CachedInformerFactory keeps one per resource, starts it on first use and
// waits, within the caller's context, for its cache to sync. No constructor
// starts a goroutine: informers run from the first CachedInformerFactory.Get
// until the factory's Stop channel is closed, and an informer taken from
// TypedInformerFactory directly runs only when, and as long as, its caller
// runs it.
//
// # Lists
//
// NewDynamicClient is client-go's dynamic client with a List that decodes
// each page once (DecodeList): client-go reads a page three times over and
// decodes all of it into a map it throws away before decoding each item,
// which is most of what listing a selector's subjects costs a reconciler.
// Its namespaced resources are also RawListers: ListRaw gives a page's
// items as the JSON the kube-apiserver sent (DecodeRawList), which a
// reconciler decodes straight into the shape (Shape.Decode) and guards
// its patch from (GuardJSON), with no map in between. The built-in
// workload kinds (Deployments, StatefulSets, DaemonSets, ReplicaSets,
// Jobs, CronJobs, Pods) are asked for as protobuf and come as their typed
// objects (RawObject.Object), whose pod template Shape.FromObject reads
// with no decoding: a page costs the client about a third of the CPU and
// the kube-apiserver two thirds (bench/RESULTS.md, 2026-11-28). The
// guard then tests the JSON the typed object writes (RawObject.Bytes),
// which must be the kube-apiserver's: a page whose length is not what
// the types write (a server of another minor with fields the types lack,
// or lacking some they have) is read again as JSON, and so is that
// resource from then on.
//
// # Records
//
// What bindkit did to a subject is recorded on it, in annotations written
// in the same patch as the change (BoundAnnotation, RolloutAnnotation,
// RollbackAnnotation, HeldAnnotation). Workloads keep them across
// releases, so their format is versioned (RecordFormat): a release writes
// only what the release before it reads, and leaves a record of a newer
// format alone. format_v050_test.go and format_pre050_test.go keep the
// readers and writers of earlier releases, frozen, to prove it both ways.
//
// # Resources
//
// NewRESTMapper and ResourceFor turn a kind into the resource the server
// serves it under, from discovery: Endpoints is endpoints, NetworkPolicy is
// networkpolicies, a custom resource is its declared plural. Plurals are
// never guessed.
package duck
