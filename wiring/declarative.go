package wiring

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"

	"go.uber.org/zap"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/bindkit/bindkit/controller"
	"github.com/bindkit/bindkit/controller/logging"
	"github.com/bindkit/bindkit/declarative"
	"github.com/bindkit/bindkit/injection"
	"github.com/bindkit/bindkit/policy"
	"github.com/bindkit/bindkit/psbinding"
	"github.com/bindkit/bindkit/webhook"
)

// isDeclarative reports whether the Binding kind whose Go type is PT
// declares what it adds (declarative.Declarer), and checks that it
// publishes it: without a PublishStatus, the policy would read nothing.
func isDeclarative[PT any]() (bool, error) {
	var b PT
	if _, ok := any(b).(declarative.Declarer); !ok {
		return false, nil
	}
	if _, ok := any(b).(psbinding.StatusPublisher); !ok {
		return true, fmt.Errorf("%v is a declarative.Declarer but not a psbinding.StatusPublisher: "+
			"add PublishStatus, publishing Declare() in a declarative.Status (b.Status.Publish(b.Generation, b.Declare())), so that the admission policy can read it",
			reflect.TypeFor[PT]())
	}
	return true, nil
}

// specPathOf is, for a kind whose Go type PT is a declarative.InBinding,
// the path of the Spec its users write in the Binding, checked against
// the type: each field of the dotted path is a JSON field name, and the
// last holds a declarative.Spec. It is "" for another kind.
func specPathOf[PT any]() (string, error) {
	var b PT
	in, ok := any(b).(declarative.InBinding)
	if !ok {
		return "", nil
	}
	path := in.DeclaredPath()
	if first, _, _ := strings.Cut(path, "."); first == "status" || first == "metadata" {
		return path, fmt.Errorf("%v is a declarative.InBinding whose DeclaredPath %q is not in its spec: its users write the Spec there", reflect.TypeFor[PT](), path)
	}
	t := reflect.TypeFor[PT]()
	for _, name := range strings.Split(path, ".") {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		f, found := jsonField(t, name)
		if !found {
			return path, fmt.Errorf("%v is a declarative.InBinding whose DeclaredPath %q names no field %q of %v", reflect.TypeFor[PT](), path, name, t)
		}
		t = f.Type
	}
	if t != reflect.TypeFor[declarative.Spec]() && t != reflect.TypeFor[*declarative.Spec]() {
		return path, fmt.Errorf("%v is a declarative.InBinding whose DeclaredPath %q holds a %v, not a declarative.Spec", reflect.TypeFor[PT](), path, t)
	}
	return path, nil
}

// jsonField is the field of struct type t whose JSON name is name,
// looking into fields inlined in its JSON (embedded without a name, or
// tagged ",inline").
func jsonField(t reflect.Type, name string) (reflect.StructField, bool) {
	if t.Kind() != reflect.Struct {
		return reflect.StructField{}, false
	}
	for i := range t.NumField() {
		f := t.Field(i)
		tag, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case tag == "-":
		case tag == name:
			return f, true
		case tag == "" && (f.Anonymous || strings.Contains(opts, "inline")):
			if inner, ok := jsonField(f.Type, name); ok {
				return inner, true
			}
		case tag == "" && f.Name == name:
			return f, true
		}
	}
	return reflect.StructField{}, false
}

// validateDeclared is Settings.Validate for a declarative kind: the Spec it
// declares (declarative.Spec.Validate).
func validateDeclared(b psbinding.Bindable) error {
	d, ok := b.(declarative.Declarer)
	if !ok {
		return nil
	}
	if err := d.Declare().Validate(); err != nil {
		return fmt.Errorf("declared Spec: %w", err)
	}
	return nil
}

// policyAdmission returns the admission controller of a declarative kind
// that the kube-apiserver admits by MutatingAdmissionPolicy, or nil, after
// logging why, when this one cannot be: the process chose the webhook
// (webhook.Options.DeclarativeByWebhook), the kube-apiserver does not
// serve the policy, or the kind binds custom shapes the policy does not
// know. The Impl keeps the policy and its binding programmed, and the
// kind's webhook in the path until the policy is seen in force (handover),
// then out of it: its Reconciler is the webhook's admission controller
// too, so the process serves the webhook, and no subject is created while
// neither path admits.
func (b *Kind) policyAdmission(ctx context.Context, opts Options, gla psbinding.GetListAll, cfg psbinding.AdmissionConfig, guard *guardObjects) *controller.Impl {
	logger := logging.FromContext(ctx).With(zap.String("kind", b.GVK.Kind), zap.String("resource", b.GVR.GroupResource().String()))
	switch {
	case webhook.GetOptions(ctx).DeclarativeByWebhook:
		logger.Info("admission by webhook: the process admits declarative kinds by webhook (--declarative-admission=webhook)")
		return nil
	case !reflect.ValueOf(opts.Shapes).IsZero():
		logger.Info("admission by webhook: the kind binds custom shapes (Options.Shapes), which the admission policy does not know")
		return nil
	}
	kube := injection.KubeClient(ctx)
	served, err := policy.MutatingPoliciesServed(kube.Discovery())
	if err != nil {
		panic(fmt.Errorf("%s: choose how to admit: %w", b.GVK.Kind, err))
	}
	if !served {
		logger.Info("admission by webhook: the kube-apiserver does not serve admissionregistration.k8s.io/v1 MutatingAdmissionPolicy")
		return nil
	}
	name := policy.MutatingPolicyName(b.GVR.GroupResource())
	policies := injection.NamedKubeInformerFactory(ctx, name).Admissionregistration().V1().MutatingAdmissionPolicies()
	// The policy's bindings are named after their Bindings: read them all.
	bindings := injection.KubeInformerFactory(ctx).Admissionregistration().V1().MutatingAdmissionPolicyBindings()
	fieldManager := cmp.Or(opts.FieldManager, controller.FieldManager(ctx), psbinding.DefaultFieldManager)
	popts := b.mutatingPolicyOptions(ctx, opts, fieldManager)
	h := newHandover(logger, kube, name, policies.Lister(), popts)
	var list psbinding.ListAll // set once the Bindings' informer exists, before anything reconciles
	objects, err := policy.MutatingPolicyObjects(popts, kube, policies.Lister(), bindings.Lister(), b.ControllerName,
		func() ([]policy.BindingRef, error) { return bindingRefs(list) }, h.written, logger)
	if err != nil {
		panic(err)
	}
	h.objects, err = policy.NewReconciler(policy.Options{Objects: []policy.Object{
		notifyingObject{Object: objects[0], changed: h.policyChanged},
		notifyingObject{Object: objects[1], changed: h.changed},
	}, Logger: logger})
	if err != nil {
		panic(err)
	}
	setKey := objects[1].Name()
	cfg.WebhookOff = h.inForce.Load
	impl := newAdmissionController(ctx, b.WebhookConfigurationName, b.WebhookPath, func(ctx context.Context, handler cache.ResourceEventHandler) psbinding.ListAll {
		list = gla(ctx, handler)
		gla(ctx, controller.HandleAll(func(any) { h.bindingChanged(setKey) }))
		h.prober = b.prober(ctx, list, fieldManager+"-probe", "the webhook stays in the path")
		return list
	}, cfg, func(ac *psbinding.AdmissionReconciler) controller.Reconciler {
		h.AdmissionReconciler = ac
		return guarded(ac, h, guard, logger)
	}, &b.admission)
	h.enqueue = impl.EnqueueKey
	if guard != nil {
		guard.watch(impl.EnqueueKey)
	}
	policies.Informer().AddEventHandler(controller.HandleAll(func(any) { impl.EnqueueKey(name); impl.EnqueueKey(h.probeKey) }))
	bindings.Informer().AddEventHandler(cache.FilteringResourceEventHandler{
		FilterFunc: func(obj any) bool { return isPolicyBinding(obj, name) },
		Handler: controller.HandleAll(func(any) {
			impl.EnqueueKey(setKey)
			impl.EnqueueKey(h.probeKey)
		}),
	})
	applies := "the Bindings' published specs (status.declared)"
	if b.SpecPath != "" {
		applies = "the Bindings' current specs (" + b.SpecPath + "), with no process needed"
	}
	logger.Info("admission by MutatingAdmissionPolicy: the kube-apiserver applies "+applies+"; the kind's webhook admits until the policy is seen in force, then leaves the path",
		zap.String("policy", name), zap.String("webhookConfiguration", b.WebhookConfigurationName))
	return impl
}

// mutatingPolicyOptions are the options of the kind's mutating policy in
// the process ctx describes; fieldManager is the reconciler's.
func (b *Kind) mutatingPolicyOptions(ctx context.Context, opts Options, fieldManager string) policy.MutatingPolicyOptions {
	return policy.MutatingPolicyOptions{
		Resource:           b.GVR,
		Kind:               b.GVK.Kind,
		Name:               policy.MutatingPolicyName(b.GVR.GroupResource()),
		ExcludedNamespaces: ExcludedNamespaces(ctx),
		// The reconciler's field manager, as the process will name it.
		SkipPatchesBy:    fieldManager,
		Inclusion:        opts.SelectorMode == psbinding.InclusionMode,
		RolloutByDefault: opts.Rollout != nil && opts.Rollout.Enabled(),
		// The Spec its users write in the Binding: applied as it is now.
		SpecPath: b.SpecPath,
	}
}

// bindingRefs lists the Bindings the policy is bound with: all but those
// being deleted, which the policy skips anyway.
func bindingRefs(list psbinding.ListAll) ([]policy.BindingRef, error) {
	if list == nil {
		return nil, errors.New("the Bindings' informer is not set up yet")
	}
	all, err := list()
	if err != nil {
		return nil, err
	}
	refs := make([]policy.BindingRef, 0, len(all))
	for _, b := range all {
		if b.GetDeletionTimestamp() == nil {
			refs = append(refs, bindingRef(b))
		}
	}
	return refs, nil
}

// bindingRef is what the policy's binding for b needs of it.
func bindingRef(b psbinding.Bindable) policy.BindingRef {
	ref := policy.BindingRef{Namespace: b.GetNamespace(), Name: b.GetName()}
	if subject := b.GetSubject(); subject.Name == "" {
		ref.Selector = subject.Selector
	}
	return ref
}

// isPolicyBinding reports whether obj is one of the bindings of the policy
// named policyName (policy.PolicyLabel).
func isPolicyBinding(obj any, policyName string) bool {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	m, ok := obj.(metav1.Object)
	return ok && (m.GetLabels()[policy.PolicyLabel] == policy.PolicyLabelValue(policyName) || m.GetName() == policyName)
}

// prober is the kind's probe of its admission path (see prober), listing
// the Bindings through list; a refused probe is reported as a fault that
// holds what (probeFaults).
func (b *Kind) prober(ctx context.Context, list psbinding.ListAll, fieldManager, what string) *prober {
	excluded := ExcludedNamespaces(ctx)
	return &prober{
		namespaces: injection.DuckInformerFactory(ctx), dyn: injection.DynamicClient(ctx), mapper: injection.RESTMapper(ctx),
		resource: b.GVR.GroupResource(), list: list, fieldManager: fieldManager, specPath: b.SpecPath,
		excluded: func(ns string) bool { return slices.Contains(excluded, ns) },
		faults: &probeFaults{logger: logging.FromContext(ctx).With(zap.String("resource", b.GVR.GroupResource().String())),
			recorder: controller.NewEventRecorder(ctx, injection.KubeClient(ctx), nil, fieldManager), what: what},
	}
}

// retiringAdmission is a declarative kind's admission by webhook. Once
// its webhook is seen in the path (a probe through the kube-apiserver
// reaches it), or there is nothing to admit, it removes the policy an
// earlier process admitting the kind by policy left: until then both
// admit, which binds a subject once, so no subject created during the
// switch is left unbound.
type retiringAdmission struct {
	*psbinding.AdmissionReconciler
	kube       kubernetes.Interface
	logger     *zap.Logger
	policyName string
	prober     *prober
	seen       int // consecutive probes that reached the webhook
	retired    atomic.Bool
	// shutdown is how the kind's subjects are admitted while no process
	// runs (LeavePath); nil when the kube-apiserver cannot apply its
	// policy. leaving, once set, keeps the webhook's rules empty.
	shutdown *policy.MutatingPolicyOptions
	list     psbinding.ListAll
	leaving  atomic.Bool
}

// Reconcile implements controller.Reconciler.
func (r *retiringAdmission) Reconcile(ctx context.Context, key string) error {
	if err := r.AdmissionReconciler.Reconcile(ctx, key); err != nil || r.retired.Load() || !r.IsLeader() {
		return err
	}
	_, inPath, err := r.PublishedCABundle()
	if err != nil || (!inPath && r.IndexedBindings() > 0) {
		return err // the configuration's update brings the key back
	}
	if inPath {
		res, ok, err := r.prober.probe(ctx)
		r.faults().report(err)
		switch {
		case isRefusal(err):
			return controller.NewRequeueAfter(refusalRetry) // reported: logged, evented, unready
		case err != nil:
			r.logger.Info("probe of the admission path failed; the admission policy stays until the webhook is seen in the path", zap.Error(err))
			return controller.NewRequeueAfter(probeRetry)
		case ok && !res.webhookCalled:
			r.seen = 0
			return controller.NewRequeueAfter(probeInterval)
		case ok && r.seen+1 < probesInForce:
			r.seen++
			return controller.NewRequeueAfter(probeInterval)
		}
	}
	removed, err := policy.RemoveMutatingPolicy(ctx, r.kube, r.policyName)
	if err != nil {
		return err
	}
	if removed {
		r.logger.Info("admission policy removed: the webhook admits the kind now", zap.String("policy", r.policyName))
	}
	r.retired.Store(true)
	return nil
}

// Uninstall implements sharedmain.Uninstaller: what an earlier process
// admitting by policy left goes too.
func (r *retiringAdmission) Uninstall(ctx context.Context) error {
	if _, err := policy.RemoveMutatingPolicy(ctx, r.kube, r.policyName); err != nil {
		return fmt.Errorf("uninstall: %w", err)
	}
	return r.AdmissionReconciler.Uninstall(ctx)
}

// webhookAdmission is the Webhook constructor's body for any kind: the
// admission controller, for a declarative kind one that retires the
// policy, with the namespace guard when there is one.
func (b *Kind) webhookAdmission(ctx context.Context, opts Options, gla psbinding.GetListAll, cfg psbinding.AdmissionConfig, declarativeKind bool, guard *guardObjects) *controller.Impl {
	logger := logging.FromContext(ctx)
	var impl *controller.Impl
	if !declarativeKind {
		impl = newAdmissionController(ctx, b.WebhookConfigurationName, b.WebhookPath, gla, cfg, func(ac *psbinding.AdmissionReconciler) controller.Reconciler {
			return guarded(ac, ac, guard, logger)
		}, &b.admission)
	} else {
		name := policy.MutatingPolicyName(b.GVR.GroupResource())
		fieldManager := cmp.Or(cfg.FieldManager, controller.FieldManager(ctx), psbinding.DefaultFieldManager)
		r := &retiringAdmission{kube: injection.KubeClient(ctx), logger: logger, policyName: name}
		if b.policyCanAdmit(ctx, opts) {
			popts := b.mutatingPolicyOptions(ctx, opts, fieldManager)
			r.shutdown = &popts
		}
		cfg.WebhookOff = r.leaving.Load
		impl = newAdmissionController(ctx, b.WebhookConfigurationName, b.WebhookPath, func(ctx context.Context, handler cache.ResourceEventHandler) psbinding.ListAll {
			list := gla(ctx, handler)
			r.prober = b.prober(ctx, list, fieldManager+"-probe", "the admission policy stays beside the webhook")
			r.list = list
			return list
		}, cfg, func(ac *psbinding.AdmissionReconciler) controller.Reconciler {
			r.AdmissionReconciler = ac
			return guarded(ac, r, guard, logger)
		}, &b.admission)
	}
	if guard != nil {
		guard.watch(impl.EnqueueKey)
	}
	return impl
}
