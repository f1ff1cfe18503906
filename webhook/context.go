package webhook

import "context"

type optionsKey struct{}

// WithOptions returns a copy of ctx that carries opts: the one description
// of the webhook that every part of a process reads, so the server, the
// certificates reconciler and each admission controller agree on the
// certificates Secret (SecretName, Keys), the Service and where the webhook
// may be called. injection/sharedmain builds it once from its flags and
// stores it before it calls any controller constructor.
func WithOptions(ctx context.Context, opts Options) context.Context {
	return context.WithValue(ctx, optionsKey{}, opts)
}

// GetOptions returns the Options stored by WithOptions, every zero field
// replaced by its default, or DefaultOptions when ctx carries none: the
// settings a server built with New from the same Options runs with.
func GetOptions(ctx context.Context) Options {
	opts, _ := ctx.Value(optionsKey{}).(Options)
	// An invalid port or TLS version is New's to report; the fields a
	// consumer reads here are filled either way.
	opts, _ = opts.withDefaults()
	return opts
}

// OptionsFrom returns the Options stored by WithOptions as they were
// stored, without defaults, and whether ctx carries any.
func OptionsFrom(ctx context.Context) (Options, bool) {
	opts, ok := ctx.Value(optionsKey{}).(Options)
	return opts, ok
}
