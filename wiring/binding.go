package wiring

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/tools/cache"

	"github.com/bindkit/bindkit/configmap"
	"github.com/bindkit/bindkit/controller"
	"github.com/bindkit/bindkit/duck"
	"github.com/bindkit/bindkit/injection"
	"github.com/bindkit/bindkit/policy"
	"github.com/bindkit/bindkit/psbinding"
)

// Pointer is the constraint on a Binding kind's Go type: PT is *T, and *T
// is a psbinding.Bindable (a Kubernetes object with a subject, a status,
// Do and Undo), as a CRD type that embeds metav1.TypeMeta,
// metav1.ObjectMeta and duck.Status, with generated deep copies, is.
type Pointer[T any] interface {
	*T
	psbinding.Bindable
}

// Bindable is the former name of Pointer.
//
// Deprecated: use Pointer; the contract a Binding implements is
// psbinding.Bindable, and this is only the constraint that ties it to T.
type Bindable[T any] = Pointer[T]

// Binding is the former name of Kind.
//
// Deprecated: use Kind; a Binding is the custom resource, and this is
// the kind wired.
type Binding = Kind

// Options are the optional parts of a Binding kind's wiring. The zero value
// wires a Binding whose Do and Undo need nothing but the Binding itself;
// every zero field takes the default its comment names.
type Options struct {
	// Kind is the Bindings' kind. Default: the name of the Go type, as
	// CRDs generated from Go types (controller-gen) name it.
	Kind string
	// ControllerName names the reconciler's work queue, its logs and the
	// source of its events. Default: the resource, e.g. "envbindings".
	ControllerName string
	// WebhookConfigurationName is the MutatingWebhookConfiguration the
	// admission controller programs, which the deployment installs
	// (config/500-webhook-configuration.yaml). Default:
	// "<resource>.<group>", e.g. "envbindings.bindings.example.com".
	WebhookConfigurationName string
	// WebhookName is the webhook within that configuration. Default:
	// WebhookConfigurationName.
	WebhookName string
	// WebhookPath is where the webhook server routes this kind's admission
	// requests. Default: "/<resource>", e.g. "/envbindings".
	WebhookPath string

	// WithContext, if set, prepares the context Do and Undo run in, on both
	// paths (psbinding.BaseReconciler.WithContext).
	WithContext psbinding.BindableContext
	// SubResources, if set, is called by the controller's constructor with
	// its context (for clients and informers, see package injection) and
	// the Impl it builds (to enqueue a Binding when something it owns
	// changes, e.g. with impl.EnqueueControllerOf), and returns the
	// reconciler of what each Binding owns beside its subjects
	// (psbinding.BaseReconciler.SubResourcesReconciler).
	SubResources func(ctx context.Context, impl *controller.Impl) psbinding.SubResourcesReconcilerInterface
	// Shapes finds the pod template of subject kinds that do not keep it
	// at spec.template; the zero value knows the built-in kinds. Both paths
	// use it.
	Shapes duck.Shapes
	// SelectorMode chooses exclusion (the default) or inclusion of
	// namespaces, on both paths.
	SelectorMode psbinding.SelectorMode
	// AdmissionOnly lists the subject kinds whose pod template cannot change
	// in place. Default: bare Pods and Jobs
	// (psbinding.BaseReconciler.AdmissionOnly).
	AdmissionOnly []schema.GroupKind
	// PatchConcurrency bounds the kind's subject patches in flight, over
	// all its concurrent reconciles. Default:
	// psbinding.DefaultPatchConcurrency.
	PatchConcurrency int
	// FieldManager names the reconciler in the managedFields of what it
	// writes. Default: the process's (controller.WithFieldManager, which
	// sharedmain sets to the component name), else
	// psbinding.DefaultFieldManager.
	FieldManager string
	// CallOnOwnPatches keeps the webhook called for the reconciler's own
	// patches of subjects, which by default it is not
	// (psbinding.AdmissionConfig.CallOnOwnPatches).
	CallOnOwnPatches bool
	// Rollout, if set, paces every Binding's change through its subjects
	// in health-gated waves (psbinding.RolloutPolicy); each Binding may
	// override it with its rollout annotations
	// (psbinding.RolloutMaxChangingAnnotation and the others). Default:
	// none, every subject is patched at once.
	Rollout *psbinding.RolloutPolicy
	// Scheme resolves the kind of the objects events are about when their
	// TypeMeta is empty. Default: client-go's scheme; the Bindings the
	// controller reads carry their TypeMeta, so it needs no more.
	Scheme *runtime.Scheme
	// WithoutNamespaceGuard leaves out the kind's namespace guard, which
	// the Webhook constructor otherwise keeps programmed: a
	// ValidatingAdmissionPolicy that refuses, at create and update, a
	// Binding whose subject names another namespace (policy.NamespaceGuard,
	// reading the subject at policy.DefaultSubjectPath). Opt out only for a
	// kind whose CRD keeps its subject elsewhere and refuses such a Binding
	// itself; the reconciler and admission never act outside a Binding's
	// namespace either way.
	WithoutNamespaceGuard bool

	// SubjectPath is the dotted path of the subject reference (a
	// tracker.Reference) in the kind's Bindings, which the admission
	// policies on the Bindings read (the namespace guard, the authority
	// policy). Default: policy.DefaultSubjectPath, "spec.subject".
	SubjectPath string
	// SubjectKinds are the custom kinds with a pod template, beside the
	// built-in workloads (policy.BuiltInSubjectKinds), that the kind's
	// Bindings may name, each with its resource: the authority policy
	// checks that a Binding's author may patch its subject, and an
	// authorization check names a resource. A Binding naming a kind in
	// neither list is allowed only to a user who may patch every resource
	// of the kind's group. Default: none.
	SubjectKinds []policy.SubjectKind
	// References are the objects, beside the subject, that a Binding
	// names and whose content reaches the subjects (a Secret whose data
	// Do copies into env, say): the authority policy refuses a Binding
	// whose author does not hold each Reference's verb on each object it
	// names. Leave out what reaches the subjects only by name (a Secret
	// mounted by name into a workload its author may patch: Kubernetes
	// itself does not check which Secret a pod mounts). Default: none.
	References []policy.Reference
}

// Kind is one Binding kind, wired by New: the two constructors that
// sharedmain.Main runs (each is a sharedmain.Constructor), and the names
// they were wired with, which the deployment's YAML must repeat. It is not
// itself a Binding (a psbinding.Bindable): it builds what binds them.
type Kind struct {
	// Controller builds the reconciler that binds existing subjects and
	// unbinds them when a Binding goes (psbinding.BaseReconciler, completed
	// by NewReconcilerImpl).
	Controller func(ctx context.Context, cmw configmap.Watcher) *controller.Impl
	// Webhook builds the admission controller that binds subjects as they
	// are created or updated and programs the webhook configuration
	// (NewAdmissionController), and keeps the kind's namespace guard
	// programmed (unless Options.WithoutNamespaceGuard). For a Declarative
	// kind it may instead program a MutatingAdmissionPolicy and take the
	// webhook out of the path once the policy is seen in force, when the
	// process allows it (webhook.Options.DeclarativeByWebhook unset) and the
	// kube-apiserver serves it.
	Webhook func(ctx context.Context, cmw configmap.Watcher) *controller.Impl

	// Declarative reports a kind whose Go type declares what it adds
	// (declarative.Declarer): Webhook then admits its subjects by
	// MutatingAdmissionPolicy where it can (see package policy), by the
	// webhook otherwise, and logs which.
	Declarative bool

	// GVR is the Bindings' resource.
	GVR schema.GroupVersionResource
	// GVK is the Bindings' kind (Options.Kind, with its default).
	GVK schema.GroupVersionKind
	// ControllerName, WebhookConfigurationName, WebhookName and WebhookPath
	// are the Options' names with their defaults filled in.
	ControllerName           string
	WebhookConfigurationName string
	WebhookName              string
	WebhookPath              string

	// authority describes the kind's authority policy; namespaceGuard
	// says whether the Webhook also keeps the namespace guard.
	authority      policy.AuthorityOptions
	namespaceGuard bool

	// admission is the kind's AdmissionReconciler once the Webhook
	// constructor has built it: the reconciler's companions
	// (psbinding.BaseReconciler.Companions) come from its index.
	admission atomic.Pointer[psbinding.AdmissionReconciler]
}

// New wires the Binding kind whose Go type is T and whose resource is gvr:
//
//	kind, err := wiring.New[v1alpha1.EnvBinding](v1alpha1.GroupVersionResource(), wiring.Options{})
//	if err != nil { ... }
//	sharedmain.Main("envbinding-controller", kind.Controller, kind.Webhook)
//
// The controller lists and watches the Bindings through a typed informer
// over the dynamic client (injection.TypedInformerFor), so T needs no
// generated clientset, informer or lister. New checks gvr and opts and
// reports every problem, each naming its field, in one error; the
// constructors it returns read only the context sharedmain (or a test,
// see package injectiontest) gives them, and panic, naming what is
// missing, only when that context lacks what package injection puts there.
func New[T any, PT Pointer[T]](gvr schema.GroupVersionResource, opts Options) (*Kind, error) {
	kind := cmp.Or(opts.Kind, reflect.TypeFor[T]().Name())
	b := &Kind{
		GVR:                      gvr,
		GVK:                      gvr.GroupVersion().WithKind(kind),
		ControllerName:           cmp.Or(opts.ControllerName, gvr.Resource),
		WebhookConfigurationName: cmp.Or(opts.WebhookConfigurationName, gvr.GroupResource().String()),
		WebhookPath:              cmp.Or(opts.WebhookPath, "/"+gvr.Resource),
	}
	b.WebhookName = cmp.Or(opts.WebhookName, b.WebhookConfigurationName)
	b.authority = authorityOptions(gvr, opts)
	b.namespaceGuard = !opts.WithoutNamespaceGuard
	declarativeKind, declErr := isDeclarative[PT]()
	b.Declarative = declarativeKind
	if err := errors.Join(b.validate(opts), declErr); err != nil {
		return nil, fmt.Errorf("wiring: %s (%s): %w", kind, gvr.GroupResource(), err)
	}

	// Both constructors share one informer per process (TypedInformerFor),
	// so they list the same cache.
	informer := func(ctx context.Context) *injection.TypedInformer[T, PT] {
		return injection.TypedInformerFor[T, PT](ctx, gvr)
	}
	listAll := func(lister *injection.TypedLister[T]) psbinding.ListAll {
		return func() ([]psbinding.Bindable, error) {
			items, err := lister.List(labels.Everything())
			if err != nil {
				return nil, fmt.Errorf("list %s: %w", gvr.GroupResource(), err)
			}
			out := make([]psbinding.Bindable, len(items))
			for i, item := range items {
				out[i] = PT(item)
			}
			return out, nil
		}
	}

	// One value of what both paths must agree on; each constructor adds
	// the namespaces its context excludes.
	settings := psbinding.Settings{
		WithContext:  opts.WithContext,
		Shapes:       opts.Shapes,
		SelectorMode: opts.SelectorMode,
		// The webhook recognises the reconciler's patches by it.
		FieldManager: opts.FieldManager,
		Rollout:      opts.Rollout,
	}
	if declarativeKind {
		// What a declarative Binding adds is validated as a pod would be
		// before anything of it is published or applied.
		settings.Validate = validateDeclared
	}

	b.Controller = func(ctx context.Context, _ configmap.Watcher) *controller.Impl {
		inf := informer(ctx)
		lister := inf.Lister()
		r := &psbinding.BaseReconciler{
			Settings: settings,
			GVR:      gvr,
			// Straight from the lister: the reconciler works on a copy.
			Get: func(namespace, name string) (psbinding.Bindable, error) {
				obj, err := lister.Get(namespace, name)
				if err != nil {
					return nil, err // never a typed nil inside the interface
				}
				return PT(obj), nil
			},
			AdmissionOnly:    opts.AdmissionOnly,
			PatchConcurrency: opts.PatchConcurrency,
			Companions:       b.companions,
			Recorder:         controller.NewEventRecorder(ctx, injection.KubeClient(ctx), opts.Scheme, b.ControllerName),
		}
		impl := NewReconcilerImpl(ctx, b.ControllerName, r, inf.Informer(), listAll(lister))
		if opts.SubResources != nil {
			r.SubResourcesReconciler = opts.SubResources(ctx, impl)
		}
		return impl
	}

	b.Webhook = func(ctx context.Context, _ configmap.Watcher) *controller.Impl {
		gla := func(ctx context.Context, handler cache.ResourceEventHandler) psbinding.ListAll {
			inf := informer(ctx)
			inf.Informer().AddEventHandler(handler)
			return listAll(inf.Lister())
		}
		cfg := psbinding.AdmissionConfig{
			Settings:         settings,
			WebhookName:      b.WebhookName,
			CallOnOwnPatches: opts.CallOnOwnPatches,
		}
		guard := b.guards(ctx)
		if declarativeKind {
			if impl := b.policyAdmission(ctx, opts, gla, cfg, guard); impl != nil {
				return impl
			}
		}
		return b.webhookAdmission(ctx, gla, cfg, declarativeKind, guard)
	}
	return b, nil
}

// companions are the Bindings the kind's admission applies to an object,
// none while the process runs no admission for the kind.
func (b *Kind) companions(group, kind, namespace, name string, labels map[string]string) []psbinding.Bindable {
	if ac := b.admission.Load(); ac != nil {
		return ac.Companions(group, kind, namespace, name, labels)
	}
	return nil
}

// validate reports every problem with gvr and the names, joined.
func (b *Kind) validate(opts Options) error {
	var errs []error
	if b.GVR.Group == "" || b.GVR.Version == "" || b.GVR.Resource == "" {
		errs = append(errs, fmt.Errorf("resource %q: group, version and resource are all required (a Binding kind is a custom resource)", b.GVR.String()))
	}
	for _, e := range validation.IsDNS1123Subdomain(b.WebhookConfigurationName) {
		errs = append(errs, fmt.Errorf("Options.WebhookConfigurationName %q: %s", b.WebhookConfigurationName, e))
	}
	// The API server wants a webhook's name fully qualified: three labels.
	if msgs := validation.IsDNS1123Subdomain(b.WebhookName); len(msgs) > 0 || strings.Count(b.WebhookName, ".") < 2 {
		errs = append(errs, fmt.Errorf("Options.WebhookName %q: must be a fully qualified domain name of at least three labels, like envbindings.bindings.example.com", b.WebhookName))
	}
	if !strings.HasPrefix(b.WebhookPath, "/") || strings.ContainsAny(b.WebhookPath, "?# ") {
		errs = append(errs, fmt.Errorf("Options.WebhookPath %q: must be an absolute URL path, like /envbindings", b.WebhookPath))
	}
	if strings.TrimSpace(b.ControllerName) != b.ControllerName {
		errs = append(errs, fmt.Errorf("Options.ControllerName %q: must not start or end with spaces", b.ControllerName))
	}
	switch opts.SelectorMode {
	case psbinding.ExclusionMode, psbinding.InclusionMode:
	default:
		errs = append(errs, fmt.Errorf("Options.SelectorMode %v: must be psbinding.ExclusionMode or psbinding.InclusionMode", opts.SelectorMode))
	}
	if opts.Rollout != nil {
		if err := opts.Rollout.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("Options.Rollout: %w", err))
		}
	}
	if len(errs) == 0 || b.GVR.Resource != "" && b.GVR.Group != "" && b.GVR.Version != "" {
		// The authority policy's own options (the resource is reported once, above).
		if _, _, err := policy.Authority(b.authority); err != nil {
			errs = append(errs, err)
		}
	}
	if opts.PatchConcurrency < 0 {
		errs = append(errs, fmt.Errorf("Options.PatchConcurrency %d: must not be negative", opts.PatchConcurrency))
	}
	return errors.Join(errs...)
}
