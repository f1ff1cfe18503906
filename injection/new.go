package injection

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"

	"github.com/bindkit/bindkit/controller/logging"
	"github.com/bindkit/bindkit/duck"
)

// Clients are what NewWithClients puts in a context. New builds them from
// one rest.Config; a test passes fakes (see package injectiontest).
type Clients struct {
	// Config is what the clients were built from. Optional: when nil,
	// Config(ctx) panics and TryConfig reports false.
	Config *rest.Config
	// Kube is the clientset for built-in kinds. Required.
	Kube kubernetes.Interface
	// Dynamic reads and writes any resource, custom ones included. Required.
	Dynamic dynamic.Interface
	// Metadata lists and watches any resource as metadata only, for the
	// shared subject cache. Required.
	Metadata metadata.Interface
	// RESTMapper turns kinds into resources. When nil, a duck.RESTMapper
	// over Kube's discovery client is used.
	RESTMapper meta.RESTMapper
}

// Options configure how New and NewWithClients build the informers. The
// zero value is the default.
type Options struct {
	// ResyncPeriod is the resync period of every informer the set builds:
	// the kube factory's, the typed and the duck ones. Default: 0, which
	// turns resync off; controllers are expected to requeue what they need
	// to. Negative is an error.
	ResyncPeriod time.Duration
	// KubeInformerOptions are passed to client-go's shared informer
	// factory, e.g. informers.WithNamespace to watch one namespace only.
	// Default: none.
	KubeInformerOptions []informers.SharedInformerOption
}

// validate returns an error naming the field opts sets wrongly.
func (opts Options) validate() error {
	if opts.ResyncPeriod < 0 {
		return fmt.Errorf("injection: ResyncPeriod %v is negative", opts.ResyncPeriod)
	}
	return nil
}

// New builds the kube, dynamic (duck.NewDynamicClient) and discovery
// clients from cfg, a RESTMapper over discovery, and an InformerSet over
// the clients, and returns a copy of ctx that carries all of them (read
// them back with Config, KubeClient, DynamicClient, MetadataClient,
// RESTMapper, Informers, KubeInformerFactory and DuckInformerFactory).
// Nothing is started and the server is not contacted.
//
// The informers live at most as long as ctx: when ctx ends, or on
// InformerSet.Shutdown, they stop. The logger in ctx (controller/logging)
// hears of objects the informers skip because they do not convert.
//
// The intended order, for sharedmain as for a test:
//
//	ctx, set, err := injection.New(ctx, cfg, injection.Options{})
//	impl := NewController(ctx, cmw)   // requests informers, starts nothing
//	set.Start(ctx)
//	err = set.WaitForCacheSync(ctx)   // bounded by ctx
//	impl.Run(ctx)
func New(ctx context.Context, cfg *rest.Config, opts Options) (context.Context, *InformerSet, error) {
	if cfg == nil {
		return nil, nil, errors.New("injection: nil rest config")
	}
	if err := opts.validate(); err != nil {
		return nil, nil, err
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("injection: kube client for %s: %w", cfg.Host, err)
	}
	// Its List decodes each page once: a selector's subjects are listed
	// page by page when a Binding binds many.
	dyn, err := duck.NewDynamicClient(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("injection: dynamic client for %s: %w", cfg.Host, err)
	}
	md, err := metadata.NewForConfig(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("injection: metadata client for %s: %w", cfg.Host, err)
	}
	return NewWithClients(ctx, Clients{Config: cfg, Kube: kube, Dynamic: dyn, Metadata: md}, opts)
}

// NewWithClients is New for clients that already exist, such as fakes. It
// fails, naming the field, when Kube, Dynamic or Metadata is nil or opts
// is not valid.
func NewWithClients(ctx context.Context, clients Clients, opts Options) (context.Context, *InformerSet, error) {
	var missing []string
	for name, ok := range map[string]bool{"Kube": clients.Kube != nil, "Dynamic": clients.Dynamic != nil, "Metadata": clients.Metadata != nil} {
		if !ok {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		return nil, nil, fmt.Errorf("injection: Clients needs %s", strings.Join(missing, ", "))
	}
	if err := opts.validate(); err != nil {
		return nil, nil, err
	}
	if clients.RESTMapper == nil {
		clients.RESTMapper = duck.NewRESTMapper(clients.Kube.Discovery())
	}
	set := newInformerSet(ctx, clients, opts, logging.FromContext(ctx))
	if clients.Config != nil {
		ctx = WithConfig(ctx, clients.Config)
	}
	ctx = WithKubeClient(ctx, clients.Kube)
	ctx = WithDynamicClient(ctx, clients.Dynamic)
	ctx = WithMetadataClient(ctx, clients.Metadata)
	ctx = WithRESTMapper(ctx, clients.RESTMapper)
	ctx = WithDuckInformerFactory(ctx, set.DuckInformerFactory())
	ctx = WithInformers(ctx, set)
	return ctx, set, nil
}
